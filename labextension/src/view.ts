/**
 * How a snapshot is shown: `taskcell/planner/view.py` and `amounts.py`, line for line.
 *
 * The notebook panel draws the Python record, the sidebar this one; the types and constants
 * come from `snapshot.ts` (generated from the Python), and `test/view.test.ts` checks that both
 * give the same record for the snapshots of `test/view-cases.json` (written by the Python).
 * Change the rules there first, then here.
 */
import {
  BYTE_RESOURCES,
  FOLD_NAMES,
  IDLE_ROWS,
  KERNEL_SHOWN,
  RUNNING_SHOWN,
  STRIP_SECONDS,
  STRIP_STEPS,
  WAITING_ROWS,
  type IBarView,
  type IEndedTask,
  type IEndedView,
  type IGroupView,
  type IPoolInfo,
  type IPoolView,
  type IPoolWorker,
  type IPoolWorkerView,
  type IResourceUse,
  type ISnapshot,
  type ISnapshotView,
  type IStripView,
  type ITaskInfo,
  type ITaskView,
  type IUsageStrip,
  type IWorkerSnapshot,
  type IWorkerView
} from './snapshot';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** `value` to `digits` significant digits, half up, without exponent or trailing zeros. */
export function significant(value: number, digits: number): string {
  if (!Number.isFinite(value)) {
    return String(value);
  }
  return String(Number(value.toPrecision(digits)));
}

/** `12884901888` -> `12 GiB`; `1536` -> `1.5 KiB`; `512` -> `512 B`. */
export function showBytes(nbytes: number): string {
  let amount = nbytes;
  let unit = UNITS[0];
  for (unit of UNITS) {
    if (Math.abs(amount) < 1024 || unit === UNITS[UNITS.length - 1]) {
      break;
    }
    amount /= 1024;
  }
  if (unit === 'B' || Math.abs(amount) >= 100) {
    return `${Math.sign(amount) * Math.round(Math.abs(amount))} ${unit}`;
  }
  return `${significant(amount, 3)} ${unit}`;
}

/** An amount of `resource`: bytes (`MEMORY`, `disk`...) in KiB..PiB, else a number. */
export function showAmount(resource: string, amount: number): string {
  if (BYTE_RESOURCES.includes(resource.toUpperCase()) || resource === 'memory limit') {
    return showBytes(amount);
  }
  return significant(amount, 6);
}

/** `1 worker`, `2 workers`. */
export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** `75` -> `1m15s`; `4000` -> `1h06m`; never negative. */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.trunc(seconds));
  const two = (n: number) => String(n).padStart(2, '0');
  if (s < 60) {
    return `${s}s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  }
  return `${Math.floor(s / 3600)}h${two(Math.floor((s % 3600) / 60))}m`;
}

/** How long a task ran: `4.25` -> `4.2s` (tenths, cut, under a minute), else as `duration`. */
export function secondsLabel(seconds: number): string {
  if (seconds >= 60) {
    return duration(seconds);
  }
  const tenths = Math.max(0, Math.trunc(seconds * 10));
  return `${Math.floor(tenths / 10)}.${tenths % 10}s`;
}

/** `0.5` -> `50%`, rounded half up. */
export function percent(share: number): string {
  return `${Math.floor(share * 100 + 0.5)}%`;
}

/** `{GPU: 1}` -> `GPU=1`; a task that asks for nothing needs `a thread`. */
export function requestLabel(request: Record<string, number>): string {
  const parts = Object.entries(request).map(([r, a]) => `${r}=${showAmount(r, a)}`);
  return parts.join(', ') || 'a thread';
}

export function barView(use: IResourceUse): IBarView {
  const { resource: name, total, running, assigned } = use;
  const runningShare = total > 0 ? Math.min(running / total, 1) : 0;
  const assignedShare = total > 0 ? Math.min(assigned / total, 1 - runningShare) : 0;
  const show = (v: number) => showAmount(name, v);
  let label = `${show(running)} of ${show(total)} ${name} in use`;
  if (assigned > 0) {
    label += `, ${show(assigned)} waiting`;
  }
  return {
    resource: name,
    total,
    running,
    assigned,
    running_share: runningShare,
    assigned_share: assignedShare,
    label,
    title:
      `${name}: ${show(running)} of ${show(total)} held by running tasks, ` +
      `${show(assigned)} asked for by tasks waiting on it`,
    oversubscribed: running + assigned > total
  };
}

export function taskView(task: ITaskInfo, now: number): ITaskView {
  return {
    key: task.key,
    name: task.name || task.key,
    state: task.state,
    request: requestLabel(task.request),
    where: task.worker ? `on ${task.worker}` : 'queued',
    waited: duration(now - task.since),
    waiting_for: task.waiting_for
  };
}

/** Python's order of strings (code points; the same as UTF-16 units outside astral planes). */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const label = (w: IWorkerSnapshot) => w.name || w.address;
const busy = (w: IWorkerSnapshot) => Boolean(w.running_tasks || w.assigned_tasks);
const byName = (a: IWorkerSnapshot, b: IWorkerSnapshot) =>
  compare(label(a), label(b)) || compare(a.address, b.address);

export function workerView(worker: IWorkerSnapshot, now: number): IWorkerView {
  const running = worker.tasks
    .filter(t => t.state === 'running')
    .sort((a, b) => a.since - b.since || compare(a.key, b.key));
  const hidden = worker.running_tasks - Math.min(running.length, RUNNING_SHOWN);
  return {
    address: worker.address,
    name: label(worker),
    busy: busy(worker),
    bars: worker.resources.map(barView),
    running: running.slice(0, RUNNING_SHOWN).map(t => taskView(t, now)),
    more_running: hidden > 0 ? `+${hidden} more running` : null,
    waiting: worker.assigned_tasks ? `${worker.assigned_tasks} waiting` : null
  };
}

/** Workers with identical resources together, largest group first. */
export function groups(workers: IWorkerSnapshot[]): IWorkerSnapshot[][] {
  const by = new Map<string, IWorkerSnapshot[]>();
  for (const w of workers) {
    const signature = JSON.stringify(w.resources.map(u => [u.resource, u.total]));
    by.set(signature, [...(by.get(signature) ?? []), w]);
  }
  const smallest = (g: IWorkerSnapshot[]) => g.map(w => w.address).reduce((a, b) => (b < a ? b : a));
  return [...by.values()].sort((a, b) => b.length - a.length || compare(smallest(a), smallest(b)));
}

export function groupView(group: IWorkerSnapshot[], now: number): IGroupView {
  const first = group[0];
  const has = first.resources.map(u => `${u.resource} ${showAmount(u.resource, u.total)}`);
  const busyOnes = group.filter(busy).sort(byName);
  let idle = group.filter(w => !busy(w)).sort(byName);
  let title = `${plural(group.length, 'worker')} with ${has.join(', ')}`;
  if (group.length > 1) {
    title += ` · ${busyOnes.length} busy`;
  }
  let folded: string | null = null;
  if (group.length > IDLE_ROWS && idle.length > 1) {
    const names = idle.slice(0, FOLD_NAMES).map(label).join(', ');
    folded = `${idle.length} idle: ${names}${idle.length > FOLD_NAMES ? ', ...' : ''}`;
    idle = [];
  }
  return {
    title,
    resources: first.resources.map(u => u.resource),
    workers: [...busyOnes, ...idle].map(w => workerView(w, now)),
    folded
  };
}

/** Tasks waiting for something: queued on the scheduler, then assigned on a worker. */
export function waitingTasks(snapshot: ISnapshot): ITaskInfo[] {
  const assigned = snapshot.workers
    .flatMap(w => w.tasks)
    .filter(t => t.state === 'assigned')
    .sort((a, b) => a.since - b.since || compare(a.key, b.key));
  return [...snapshot.queue, ...assigned];
}

/** One ended task's line; `names` maps the addresses of live workers to their names. */
export function endedView(task: IEndedTask, names: Map<string, string>, now: number): IEndedView {
  const worker = task.worker;
  const parts = [worker ? (names.get(worker) ?? worker) : 'never started'];
  if (task.wall !== null) {
    parts.push(secondsLabel(task.wall));
  }
  if (task.peak_memory !== null) {
    parts.push(`peak ${showBytes(task.peak_memory)}`);
  }
  parts.push(`${duration(now - task.ended)} ago`);
  return {
    key: task.key,
    name: task.name || task.key,
    state: task.state,
    detail: parts.join(' · '),
    error: task.error
  };
}

/**
 * A resource's strip up to `now`: its steps, then `current` (the share running tasks hold now)
 * in the steps since the snapshot's last one.
 */
export function stripView(
  resource: string,
  strip: IUsageStrip | undefined,
  current: number,
  now: number
): IStripView {
  const last = Math.floor(now / STRIP_SECONDS);
  const known = strip ? strip.shares : [];
  const offset = strip ? Math.floor(strip.start / STRIP_SECONDS) : last + 1;
  const shares: (number | null)[] = [];
  for (let step = last - STRIP_STEPS + 1; step <= last; step++) {
    const i = step - offset;
    shares.push(i < 0 ? null : i < known.length ? known[i] : current);
  }
  const seen = shares.filter((s): s is number => s !== null);
  const minutes = Math.floor((STRIP_SECONDS * STRIP_STEPS) / 60);
  const title =
    `${resource} over the last ${minutes} min: ` +
    (seen.length ? `at most ${percent(Math.max(...seen))} held by running tasks` : 'no history yet');
  return { resource, shares, title };
}

/** One pool worker's line, how long it has started or idled measured up to `now`. */
export function poolWorkerView(worker: IPoolWorker, now: number): IPoolWorkerView {
  const { state, error } = worker;
  let label: string = state;
  if (state === 'starting') {
    label = `starting for ${duration(now - worker.since)}`;
    label += worker.started ? ` (${worker.started})` : '';
  } else if (state === 'running' && worker.idle_since !== null) {
    label = `idle ${duration(now - worker.idle_since)}`;
  } else if ((state === 'retired' || state === 'failed') && error) {
    label = `${state}: ${error}`;
  }
  const title = [worker.started, worker.address].filter(Boolean).join(' · ') || worker.name;
  return { name: worker.name, state, label, title };
}

/** One pool's lines; `shared`: another listed pool has its name, so its kernel is named. */
export function poolView(pool: IPoolInfo, shared: boolean, now: number): IPoolView {
  let title = `${pool.name} · ${pool.backend}`;
  if (shared) {
    title += ` · kernel ${pool.kernel.slice(0, KERNEL_SHOWN)}`;
  }
  const active = pool.workers.filter(w => ['starting', 'running', 'retiring'].includes(w.state));
  return {
    name: pool.name,
    title,
    shape: requestLabel(pool.resources),
    detail:
      `${active.length} of ${plural(pool.max_workers, 'worker')} · ` +
      `${plural(pool.waiting, 'task')} waiting`,
    workers: pool.workers.map(w => poolWorkerView(w, now))
  };
}

/** The whole snapshot as shown, waits measured up to `now` (Unix time, in seconds). */
export function snapshotView(snapshot: ISnapshot, now: number): ISnapshotView {
  const workers = snapshot.workers;
  const running = workers.reduce((n, w) => n + w.running_tasks, 0);
  const assigned = workers.reduce((n, w) => n + w.assigned_tasks, 0);
  const waiting = waitingTasks(snapshot);
  const totalWaiting = snapshot.queued + assigned;
  const more = totalWaiting - Math.min(waiting.length, WAITING_ROWS);
  let note: string | null = more > 0 ? `and ${more} more` : null;
  if (!waiting.length && !totalWaiting) {
    note = 'Nothing waits.';
  }
  const names = new Map(workers.map(w => [w.address, label(w)] as [string, string]));
  const byResource = new Map(snapshot.strips.map(s => [s.resource, s] as [string, IUsageStrip]));
  const totals = snapshot.totals.map(barView);
  const poolNames = snapshot.pools.map(p => p.name);
  const shared = (name: string) => poolNames.filter(n => n === name).length > 1;
  return {
    summary:
      `${plural(workers.length, 'worker')} · ${running} running · ${assigned} waiting on ` +
      `workers · ${snapshot.queued} queued`,
    totals,
    groups: groups(workers).map(g => groupView(g, now)),
    no_workers: workers.length ? null : 'No worker is connected to the scheduler.',
    waiting_title: `Waiting: ${totalWaiting}`,
    waiting: waiting.slice(0, WAITING_ROWS).map(t => taskView(t, now)),
    waiting_note: note,
    ended_title: `Ended: ${snapshot.recent.length}`,
    ended: snapshot.recent.map(t => endedView(t, names, now)),
    ended_note: snapshot.recent.length ? null : 'Nothing has ended yet.',
    strips: totals.map(b =>
      stripView(b.resource, byResource.get(b.resource), b.running_share, now)
    ),
    dashboard: snapshot.dashboard,
    pools_title: `Pools: ${snapshot.pools.length}`,
    pools: snapshot.pools.map(p => poolView(p, shared(p.name), now))
  };
}
