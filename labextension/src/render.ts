/**
 * Snapshot -> DOM, with no JupyterLab in sight: the sidebar calls these, the unit tests too.
 */
import type {
  IClusterInfo,
  IClusterState,
  IResourceUse,
  ISnapshot,
  ISuggestion,
  ITaskInfo,
  IWorkerSnapshot
} from './api';

/** Resources whose amounts are bytes (Kubernetes quantities on the Python side). */
const BYTE_RESOURCES = new Set(['MEMORY', 'DISK', 'SHM']);
const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** The most workers drawn with bars; the rest are summed in one line. */
export const MAX_WORKER_ROWS = 50;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** A number as people write it: `2`, `0.5`, `1.25`, never `0.30000000000000004`. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) {
    return String(value);
  }
  return String(Math.round(value * 100) / 100);
}

/** An amount of `resource`: bytes in binary units, everything else as a plain number. */
export function formatAmount(resource: string, value: number): string {
  if (!BYTE_RESOURCES.has(resource.toUpperCase())) {
    return formatNumber(value);
  }
  let unit = 0;
  let scaled = value;
  while (Math.abs(scaled) >= 1024 && unit < BYTE_UNITS.length - 1) {
    scaled /= 1024;
    unit++;
  }
  const digits = unit === 0 || scaled >= 100 ? 0 : 1;
  return `${scaled.toFixed(digits)} ${BYTE_UNITS[unit]}`;
}

/** `a request` -> `GPU 1, MEMORY 4.0 GiB`. */
export function formatRequest(request: Record<string, number>): string {
  const parts = Object.entries(request).map(
    ([name, amount]) => `${name} ${formatAmount(name, amount)}`
  );
  return parts.length ? parts.join(', ') : 'no resources';
}

/** `1 worker`, `2 workers`. */
export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function clamp(fraction: number): number {
  return Math.max(0, Math.min(1, Number.isFinite(fraction) ? fraction : 0));
}

/** `1 of 2 GPU in use` (+ `, 1 waiting`): the words beside a bar. */
export function useLabel(use: IResourceUse): string {
  const fmt = (v: number) => formatAmount(use.resource, v);
  let text = `${fmt(use.running)} of ${fmt(use.total)} ${use.resource} in use`;
  if (use.assigned > 0) {
    text += `, ${fmt(use.assigned)} waiting`;
  }
  return text;
}

/**
 * One resource as a bar: a solid part for what running tasks hold, a hatched part for what
 * tasks assigned to the worker and still waiting there will take.
 */
export function renderBar(use: IResourceUse): HTMLElement {
  const row = el('div', 'jp-taskcell-resource');
  row.dataset.resource = use.resource;
  row.dataset.running = String(use.running);
  row.dataset.assigned = String(use.assigned);
  row.dataset.total = String(use.total);
  row.append(el('span', 'jp-taskcell-resource-name', use.resource));

  const bar = el('div', 'jp-taskcell-bar');
  const running = clamp(use.total > 0 ? use.running / use.total : 0);
  const waiting = Math.min(clamp(use.total > 0 ? use.assigned / use.total : 0), 1 - running);
  const runningPart = el('div', 'jp-taskcell-bar-running');
  runningPart.style.width = `${(running * 100).toFixed(1)}%`;
  const assignedPart = el('div', 'jp-taskcell-bar-assigned');
  assignedPart.style.width = `${(waiting * 100).toFixed(1)}%`;
  bar.append(runningPart, assignedPart);
  bar.setAttribute('role', 'meter');
  bar.setAttribute('aria-valuemin', '0');
  bar.setAttribute('aria-valuemax', String(use.total));
  bar.setAttribute('aria-valuenow', String(use.running));
  bar.title = useLabel(use);
  if (use.running + use.assigned > use.total) {
    bar.classList.add('jp-taskcell-bar-oversubscribed');
  }
  row.append(bar, el('span', 'jp-taskcell-resource-label', useLabel(use)));
  return row;
}

function renderTask(task: ITaskInfo): HTMLElement {
  const item = el('li', `jp-taskcell-task jp-taskcell-task-${task.state}`);
  item.dataset.key = task.key;
  item.append(
    el('span', 'jp-taskcell-task-name', task.name || task.key),
    el('span', 'jp-taskcell-task-request', formatRequest(task.request)),
    el('span', 'jp-taskcell-task-state', task.state)
  );
  if (task.waiting_for) {
    item.append(el('span', 'jp-taskcell-task-reason', task.waiting_for));
  }
  item.title = task.key;
  return item;
}

export function renderWorker(worker: IWorkerSnapshot): HTMLElement {
  const box = el('div', 'jp-taskcell-worker');
  box.dataset.address = worker.address;
  box.dataset.name = worker.name;
  const head = el('div', 'jp-taskcell-worker-head');
  head.append(
    el('span', 'jp-taskcell-worker-name', worker.name || worker.address),
    el('span', 'jp-taskcell-worker-threads', plural(worker.nthreads, 'thread'))
  );
  head.title = worker.address;
  box.append(head);
  for (const use of worker.resources) {
    box.append(renderBar(use));
  }
  if (worker.tasks.length) {
    const list = el('ul', 'jp-taskcell-tasks');
    const order = { running: 0, assigned: 1, queued: 2 };
    [...worker.tasks]
      .sort((a, b) => order[a.state] - order[b.state] || a.since - b.since)
      .forEach(task => list.append(renderTask(task)));
    box.append(list);
  }
  const listed = worker.tasks.filter(t => t.state === 'assigned').length;
  if (worker.assigned_tasks > listed) {
    box.append(
      el('p', 'jp-taskcell-more', `and ${worker.assigned_tasks - listed} more waiting on this worker`)
    );
  }
  return box;
}

/** Busiest first, so the rows worth seeing stay on top of a long list. */
function busiest(workers: IWorkerSnapshot[]): IWorkerSnapshot[] {
  const load = (w: IWorkerSnapshot) =>
    w.resources.reduce((sum, r) => sum + (r.total > 0 ? (r.running + r.assigned) / r.total : 0), 0);
  return [...workers].sort(
    (a, b) => load(b) - load(a) || (a.name || a.address).localeCompare(b.name || b.address)
  );
}

export function renderSnapshot(snapshot: ISnapshot): HTMLElement {
  const root = el('div', 'jp-taskcell-snapshot');

  const totals = el('section', 'jp-taskcell-totals');
  totals.append(
    el('h3', 'jp-taskcell-heading', `Cluster: ${plural(snapshot.workers.length, 'worker')}`)
  );
  snapshot.totals.forEach(use => totals.append(renderBar(use)));
  root.append(totals);

  const workers = el('section', 'jp-taskcell-workers');
  workers.append(el('h3', 'jp-taskcell-heading', 'Workers'));
  if (!snapshot.workers.length) {
    workers.append(el('p', 'jp-taskcell-empty', 'No workers are connected to this scheduler.'));
  }
  const sorted = busiest(snapshot.workers);
  sorted.slice(0, MAX_WORKER_ROWS).forEach(w => workers.append(renderWorker(w)));
  if (sorted.length > MAX_WORKER_ROWS) {
    const rest = sorted.length - MAX_WORKER_ROWS;
    workers.append(
      el('p', 'jp-taskcell-more', `and ${rest} more idle or less busy workers (see the totals)`)
    );
  }
  root.append(workers);

  const queue = el('section', 'jp-taskcell-queue');
  queue.append(el('h3', 'jp-taskcell-heading', `Queue: ${snapshot.queued}`));
  if (snapshot.queue.length) {
    const list = el('ul', 'jp-taskcell-tasks');
    snapshot.queue.forEach(task => list.append(renderTask(task)));
    queue.append(list);
    if (snapshot.queued > snapshot.queue.length) {
      queue.append(
        el('p', 'jp-taskcell-more', `and ${snapshot.queued - snapshot.queue.length} more`)
      );
    }
  } else {
    queue.append(el('p', 'jp-taskcell-empty', 'Nothing waits for a worker.'));
  }
  root.append(queue);
  return root;
}

const STATUS_TEXT = {
  connecting: 'Connecting to the scheduler…',
  connected: 'Live',
  unreachable: 'Scheduler unreachable',
  error: 'No occupancy from this scheduler'
};

/** The status line and, when there is one, the snapshot. */
export function renderState(state: IClusterState): HTMLElement {
  const root = el('div', 'jp-taskcell-state');
  const status = el('div', `jp-taskcell-status jp-taskcell-status-${state.status}`);
  status.dataset.status = state.status;
  status.append(el('span', 'jp-taskcell-status-text', STATUS_TEXT[state.status]));
  if (state.message) {
    status.append(el('span', 'jp-taskcell-status-message', state.message));
  }
  status.title = state.address;
  root.append(status);
  if (state.snapshot && state.status === 'connected') {
    root.append(renderSnapshot(state.snapshot));
  } else if (state.snapshot) {
    const stale = renderSnapshot(state.snapshot);
    stale.classList.add('jp-taskcell-stale');
    root.append(stale);
  }
  return root;
}

/** What the cluster selector shows for a cluster: its notebooks, else its address. */
export function clusterLabel(info: IClusterInfo): string {
  const names = info.notebooks.map(n => n.path.split('/').pop() || n.path);
  return names.length ? `${names.join(', ')} (${info.address})` : info.address;
}

/** The cluster to show for `notebookPath`: its kernel's, else the one chosen, else the first. */
export function pickCluster(
  clusters: IClusterInfo[],
  notebookPath: string | null,
  chosen: string | null
): IClusterInfo | null {
  if (notebookPath) {
    const own = clusters.find(c => c.notebooks.some(n => n.path === notebookPath));
    if (own) {
      return own;
    }
  }
  return clusters.find(c => c.id === chosen) ?? clusters[0] ?? null;
}

export function renderSuggestion(suggestion: ISuggestion): HTMLElement {
  const root = el('div', 'jp-taskcell-suggestion');
  root.dataset.preset = suggestion.preset ?? '';
  root.classList.toggle('jp-taskcell-suggestion-nofit', !suggestion.fits);
  root.append(el('div', 'jp-taskcell-suggestion-summary', suggestion.message));
  if (suggestion.line) {
    root.append(el('code', 'jp-taskcell-task-line', suggestion.line));
  }
  if (suggestion.workers.length) {
    const able = suggestion.workers.filter(w => w.able);
    root.append(
      el(
        'div',
        'jp-taskcell-fit-count',
        `${able.length} of ${suggestion.workers.length} live workers can run it`
      )
    );
    const list = el('ul', 'jp-taskcell-fits');
    for (const w of suggestion.workers) {
      const item = el('li', w.able ? 'jp-taskcell-fit' : 'jp-taskcell-nofit');
      item.textContent = w.able ? `${w.name || w.address}: can run it` : `${w.name || w.address}: ${w.reason}`;
      item.title = w.address;
      list.append(item);
    }
    root.append(list);
  }
  return root;
}

/**
 * Put `line` at the top of a cell's source, replacing a `%%task` line already there.
 */
export function withTaskLine(source: string, line: string): string {
  const [first, ...rest] = source.split('\n');
  if (first.trimStart().startsWith('%%task')) {
    return [line, ...rest].join('\n');
  }
  return source ? `${line}\n${source}` : `${line}\n`;
}
