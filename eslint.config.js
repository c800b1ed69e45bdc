import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importLayers from './tools/import-layers.js';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.data/', 'bench/results/', 'bench/.work/', 'tools/', 'test-artifacts/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Dependencies between the parts of src/ run one way (the layers are listed in tools/import-layers.js).
    files: ['src/**/*.ts'],
    plugins: { 'import-layers': importLayers },
    rules: { 'import-layers/direction': 'error' },
  },
);
