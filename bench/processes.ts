import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Every process the benchmark starts goes through here, so that all of them
 * are stopped at the end, also when the harness fails or is interrupted.
 * Children run in their own process group (detached): a Ctrl-C reaches only
 * the harness, which then stops them in order (SIGTERM first, so that the
 * service can stop its embedded PostgreSQL).
 */
export interface Child {
  name: string;
  proc: ChildProcess;
  pid: number;
  /** Resolves with the exit code (or the signal's name) when the process ends. */
  exited: Promise<number | string>;
}

const running = new Set<Child>();

export interface StartOptions {
  env?: Record<string, string | undefined>;
  /** File that receives stdout and stderr; otherwise both are piped. */
  logFile?: string;
  stdio?: StdioOptions;
}

export function startProcess(name: string, command: string, args: string[], options: StartOptions = {}): Child {
  let stdio: StdioOptions = options.stdio ?? ['ignore', 'pipe', 'pipe'];
  let logFd: number | undefined;
  if (options.logFile) {
    logFd = fs.openSync(options.logFile, 'a');
    stdio = ['ignore', logFd, logFd];
  }
  const proc = spawn(command, args, { env: options.env as NodeJS.ProcessEnv | undefined, stdio, detached: true });
  if (logFd !== undefined) fs.closeSync(logFd);
  if (proc.pid === undefined) throw new Error(`could not start ${name} (${command})`);
  const child: Child = {
    name,
    proc,
    pid: proc.pid,
    exited: new Promise((resolve) => {
      proc.once('exit', (code, signal) => {
        running.delete(child);
        resolve(code ?? signal ?? 'unknown');
      });
    }),
  };
  proc.once('error', () => running.delete(child));
  running.add(child);
  return child;
}

function signalGroup(child: Child, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      process.kill(child.pid, signal);
    } catch {
      // already gone
    }
  }
}

/** SIGTERM to the process, then SIGKILL to its whole group after `graceMs`. */
export async function stopProcess(child: Child, graceMs = 15_000): Promise<void> {
  if (!running.has(child)) return;
  try {
    process.kill(child.pid, 'SIGTERM');
  } catch {
    // already gone
  }
  const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs);
  await child.exited;
  clearTimeout(timer);
  // Cluster workers share the group; make sure none outlives its primary.
  signalGroup(child, 'SIGKILL');
}

export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((child) => stopProcess(child)));
}

/** Last resort when the harness exits without having stopped its children. */
export function killAllNow(): void {
  for (const child of running) signalGroup(child, 'SIGKILL');
}

/** Runs a command to completion and returns its output; throws with its stderr when it fails. */
/**
 * Runs a bench script (`bench/<script>`, through tsx) in a process of its
 * own with `spec` in a file, and returns the JSON of its last line of
 * stdout: for work that must not share the harness's event loop.
 */
export async function runBenchChild<T>(name: string, root: string, workDir: string, script: string, spec: unknown): Promise<T> {
  const specFile = path.join(workDir, `${name}-spec-${process.pid}-${++childSpecs}.json`);
  fs.writeFileSync(specFile, JSON.stringify(spec));
  try {
    const { stdout } = await runToEnd(name, process.execPath, ['--import', 'tsx', path.join(root, 'bench', script), specFile]);
    return JSON.parse(stdout.trim().split('\n').pop() ?? '') as T;
  } finally {
    fs.rmSync(specFile, { force: true });
  }
}
let childSpecs = 0;

export async function runToEnd(name: string, command: string, args: string[], env?: Record<string, string | undefined>): Promise<{ stdout: string; stderr: string }> {
  const child = startProcess(name, command, args, { env });
  let stdout = '';
  let stderr = '';
  child.proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await child.exited;
  if (code !== 0) {
    // Compilers and some CLIs report on stdout: show the end of both.
    const tail = (s: string) => s.trim().split('\n').slice(-8).join('\n');
    throw new Error(`${name} failed (exit ${code}):\n${[tail(stdout), tail(stderr)].filter((t) => t !== '').join('\n')}`);
  }
  return { stdout, stderr };
}

function childrenOf(pid: number): number[] {
  try {
    const text = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return text === '' ? [] : text.split(/\s+/).map(Number);
  } catch {
    return [];
  }
}

function statusField(pid: number, field: string): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

function commandName(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** The Node processes of a tree: the service and its cluster workers, not an embedded PostgreSQL. */
function nodeTree(root: number): number[] {
  const found: number[] = [];
  const walk = (pid: number) => {
    if (pid !== root && commandName(pid) !== 'node') return;
    found.push(pid);
    for (const c of childrenOf(pid)) walk(c);
  };
  walk(root);
  return found;
}

export interface MemorySampler {
  /** The peak summed resident set (kB) since the previous call, or since sampling began: a scenario's own peak. */
  peakSinceLast(): number;
  /** Stops sampling; returns the peaks in kB: the summed resident set of the tree's Node processes, and the largest single one. */
  stop(): { totalKb: number; largestKb: number };
}

/** Samples VmRSS of `root` and its Node children every `intervalMs`. */
export function sampleMemory(root: number, intervalMs = 100): MemorySampler {
  let totalKb = 0;
  let largestKb = 0;
  let recentKb = 0;
  const sample = () => {
    const each = nodeTree(root).map((pid) => statusField(pid, 'VmRSS') ?? 0);
    const sum = each.reduce((a, b) => a + b, 0);
    totalKb = Math.max(totalKb, sum);
    recentKb = Math.max(recentKb, sum);
    largestKb = Math.max(largestKb, ...each);
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  return {
    peakSinceLast: () => {
      sample();
      const peak = recentKb;
      recentKb = 0;
      return peak;
    },
    stop: () => {
      clearInterval(timer);
      return { totalKb, largestKb };
    },
  };
}

/** VmHWM (the kernel's own peak resident set) of one process, in kB, while it lives. */
export function highWaterMark(pid: number): number | undefined {
  return statusField(pid, 'VmHWM');
}

/** Is `command` an executable file on the PATH? (Looked for, not run: `wrk --version` exits with 1.) */
export function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      fs.accessSync(path.join(dir, command), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
