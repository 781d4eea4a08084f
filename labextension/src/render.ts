/**
 * Snapshot -> DOM, with no JupyterLab in sight: the sidebar calls these, the unit tests too.
 *
 * What is shown, in which order and in which words, is `snapshotView` (`view.ts`, the same
 * rules as the notebook panel's); this module only draws it. Running and waiting tasks get a
 * cancel button when the caller passes `ITaskActions`.
 */
import type { IClusterInfo, IClusterState, ISnapshot, ISuggestionInfo } from './api';
import {
  LEGEND_ASSIGNED,
  LEGEND_RUNNING,
  type IBarView,
  type IEndedView,
  type IGroupView,
  type IPoolView,
  type IStripView,
  type ITaskView,
  type IWorkerView
} from './snapshot';
import { snapshotView } from './view';

/** What the sidebar can do to a task it shows. */
export interface ITaskActions {
  /** Ask for the task `key` to be stopped. */
  cancel(key: string): void;
  /** The keys asked to stop and not gone yet: their buttons are disabled. */
  readonly cancelling: ReadonlySet<string>;
}

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

/**
 * One resource as a bar: a solid part for what running tasks hold, a hatched part for what
 * tasks assigned to the worker and still waiting there will take.
 */
export function renderBar(view: IBarView): HTMLElement {
  const row = el('div', 'jp-taskcell-resource');
  row.dataset.resource = view.resource;
  row.dataset.running = String(view.running);
  row.dataset.assigned = String(view.assigned);
  row.dataset.total = String(view.total);
  const name = el('span', 'jp-taskcell-resource-name', view.resource);
  name.title = view.resource;
  row.append(name);

  const bar = el('div', 'jp-taskcell-bar');
  const runningPart = el('div', 'jp-taskcell-bar-running');
  runningPart.style.width = `${(view.running_share * 100).toFixed(1)}%`;
  const assignedPart = el('div', 'jp-taskcell-bar-assigned');
  assignedPart.style.width = `${(view.assigned_share * 100).toFixed(1)}%`;
  bar.append(runningPart, assignedPart);
  bar.setAttribute('role', 'meter');
  bar.setAttribute('aria-valuemin', '0');
  bar.setAttribute('aria-valuemax', String(view.total));
  bar.setAttribute('aria-valuenow', String(view.running));
  bar.title = view.title;
  if (view.oversubscribed) {
    bar.classList.add('jp-taskcell-bar-oversubscribed');
  }
  row.append(bar, el('span', 'jp-taskcell-resource-label', view.label));
  return row;
}

/** What the solid and the hatched parts of a bar stand for. */
export function renderLegend(): HTMLElement {
  const legend = el('div', 'jp-taskcell-legend');
  for (const [part, words] of [
    ['running', LEGEND_RUNNING],
    ['assigned', LEGEND_ASSIGNED]
  ]) {
    const item = el('span', `jp-taskcell-legend-item jp-taskcell-legend-${part}`);
    item.append(el('span', `jp-taskcell-swatch jp-taskcell-bar-${part}`), el('span', '', words));
    legend.append(item);
  }
  return legend;
}

/** A resource's last minutes: one column per step, as high as the share running tasks held. */
export function renderStrip(view: IStripView): HTMLElement {
  const strip = el('div', 'jp-taskcell-strip');
  strip.dataset.resource = view.resource;
  strip.title = view.title;
  strip.setAttribute('role', 'img');
  strip.setAttribute('aria-label', view.title);
  for (const share of view.shares) {
    const step = el('span', share === null ? 'jp-taskcell-strip-unknown' : '');
    step.style.height = `${((share ?? 0) * 100).toFixed(0)}%`;
    strip.append(step);
  }
  return strip;
}

function cancelButton(task: ITaskView, actions: ITaskActions): HTMLButtonElement {
  const button = el('button', 'jp-taskcell-cancel');
  button.type = 'button';
  const busy = actions.cancelling.has(task.key);
  button.textContent = busy ? 'Cancelling…' : 'Cancel';
  button.disabled = busy;
  button.title = `Cancel ${task.name}: stop it on its worker, or before it starts`;
  button.setAttribute('aria-label', `Cancel ${task.name}`);
  button.addEventListener('click', () => actions.cancel(task.key));
  return button;
}

/** A task's line; `where` only outside its worker's box. */
function renderTask(task: ITaskView, where: boolean, actions?: ITaskActions): HTMLElement {
  const item = el('li', `jp-taskcell-task jp-taskcell-task-${task.state}`);
  item.dataset.key = task.key;
  item.append(
    el('span', 'jp-taskcell-task-name', task.name),
    el('span', 'jp-taskcell-task-request', task.request)
  );
  if (where) {
    item.append(el('span', 'jp-taskcell-task-where', task.where));
  }
  item.append(el('span', 'jp-taskcell-task-waited', task.waited));
  if (actions) {
    item.append(cancelButton(task, actions));
  }
  if (task.waiting_for) {
    item.append(el('span', 'jp-taskcell-task-reason', task.waiting_for));
  }
  item.title = task.key;
  return item;
}

function renderTasks(tasks: ITaskView[], where: boolean, actions?: ITaskActions): HTMLElement {
  const list = el('ul', 'jp-taskcell-tasks');
  tasks.forEach(task => list.append(renderTask(task, where, actions)));
  return list;
}

/** A task that ended: its name and how, then where, how long and when, then its error. */
function renderEnded(task: IEndedView): HTMLElement {
  const item = el('li', `jp-taskcell-task jp-taskcell-ended-task jp-taskcell-ended-${task.state}`);
  item.dataset.key = task.key;
  item.dataset.state = task.state;
  item.title = task.key;
  item.append(
    el('span', 'jp-taskcell-task-name', task.name),
    el('span', 'jp-taskcell-ended-state', task.state),
    el('span', 'jp-taskcell-ended-detail', task.detail)
  );
  if (task.error) {
    item.append(el('span', 'jp-taskcell-ended-error', task.error));
  }
  return item;
}

export function renderWorker(worker: IWorkerView, actions?: ITaskActions): HTMLElement {
  const box = el('div', 'jp-taskcell-worker');
  box.dataset.address = worker.address;
  box.dataset.name = worker.name;
  box.classList.toggle('jp-taskcell-worker-busy', worker.busy);
  const head = el('div', 'jp-taskcell-worker-head', worker.name);
  head.title = worker.address;
  box.append(head, ...worker.bars.map(renderBar));
  if (worker.running.length) {
    box.append(renderTasks(worker.running, false, actions));
  }
  const counts = [worker.more_running, worker.waiting].filter(Boolean).join(' · ');
  if (counts) {
    box.append(el('p', 'jp-taskcell-more', counts));
  } else if (!worker.running.length) {
    box.append(el('p', 'jp-taskcell-empty', 'idle'));
  }
  return box;
}

function renderGroup(group: IGroupView, actions?: ITaskActions): HTMLElement {
  const box = el('div', 'jp-taskcell-group');
  box.append(el('h4', 'jp-taskcell-group-title', group.title));
  group.workers.forEach(w => box.append(renderWorker(w, actions)));
  if (group.folded) {
    box.append(el('p', 'jp-taskcell-more jp-taskcell-folded', group.folded));
  }
  return box;
}

/** A pool: its title, shape and counts, then each worker it started with its state. */
function renderPool(pool: IPoolView): HTMLElement {
  const box = el('div', 'jp-taskcell-pool');
  box.dataset.name = pool.name;
  box.append(
    el('h4', 'jp-taskcell-pool-title', pool.title),
    el('p', 'jp-taskcell-pool-shape', pool.shape),
    el('p', 'jp-taskcell-more jp-taskcell-pool-detail', pool.detail)
  );
  const list = el('ul', 'jp-taskcell-pool-workers');
  for (const worker of pool.workers) {
    const item = el('li', `jp-taskcell-pool-worker jp-taskcell-pool-worker-${worker.state}`);
    item.dataset.name = worker.name;
    item.dataset.state = worker.state;
    item.title = worker.title;
    item.append(
      el('span', 'jp-taskcell-pool-worker-name', worker.name),
      el('span', 'jp-taskcell-pool-worker-state', worker.label)
    );
    list.append(item);
  }
  box.append(list);
  return box;
}

/**
 * The snapshot as the notebook panel shows it too; `now` (Unix seconds) dates the waits, and
 * `actions`, when given, puts a cancel button on every running and waiting task.
 */
export function renderSnapshot(
  snapshot: ISnapshot,
  now: number = Date.now() / 1000,
  actions?: ITaskActions
): HTMLElement {
  const view = snapshotView(snapshot, now);
  const root = el('div', 'jp-taskcell-snapshot');

  const totals = el('section', 'jp-taskcell-totals');
  totals.append(el('p', 'jp-taskcell-summary', view.summary), renderLegend());
  view.totals.forEach((bar, i) => {
    const row = renderBar(bar);
    row.append(renderStrip(view.strips[i]));
    totals.append(row);
  });
  if (view.dashboard) {
    const link = el('a', 'jp-taskcell-dashboard', 'Dask dashboard');
    link.href = view.dashboard;
    link.target = '_blank';
    link.rel = 'noopener';
    link.title = view.dashboard;
    totals.append(link);
  }
  root.append(totals);

  const workers = el('section', 'jp-taskcell-workers');
  if (view.no_workers) {
    workers.append(el('p', 'jp-taskcell-empty', view.no_workers));
  }
  view.groups.forEach(group => workers.append(renderGroup(group, actions)));
  root.append(workers);

  if (view.pools.length) {
    const pools = el('section', 'jp-taskcell-pools');
    pools.append(el('h3', 'jp-taskcell-heading', view.pools_title), ...view.pools.map(renderPool));
    root.append(pools);
  }

  const queue = el('section', 'jp-taskcell-queue');
  queue.append(el('h3', 'jp-taskcell-heading', view.waiting_title));
  if (view.waiting.length) {
    queue.append(renderTasks(view.waiting, true, actions));
  }
  if (view.waiting_note) {
    const kind = view.waiting.length ? 'jp-taskcell-more' : 'jp-taskcell-empty';
    queue.append(el('p', kind, view.waiting_note));
  }
  root.append(queue);

  const ended = el('section', 'jp-taskcell-ended');
  ended.append(el('h3', 'jp-taskcell-heading', view.ended_title));
  if (view.ended.length) {
    const list = el('ul', 'jp-taskcell-tasks');
    view.ended.forEach(task => list.append(renderEnded(task)));
    ended.append(list);
  }
  if (view.ended_note) {
    ended.append(el('p', 'jp-taskcell-empty', view.ended_note));
  }
  root.append(ended);
  return root;
}

const STATUS_TEXT = {
  connecting: 'Connecting to the scheduler…',
  connected: 'Live',
  unreachable: 'Scheduler unreachable',
  error: 'No occupancy from this scheduler'
};

/** The status line, the scheduler's address and, when there is one, the snapshot. */
export function renderState(state: IClusterState, actions?: ITaskActions): HTMLElement {
  const root = el('div', 'jp-taskcell-state');
  const status = el('div', `jp-taskcell-status jp-taskcell-status-${state.status}`);
  status.dataset.status = state.status;
  status.append(
    el('span', 'jp-taskcell-status-text', STATUS_TEXT[state.status]),
    el('span', 'jp-taskcell-status-address', state.address)
  );
  if (state.message) {
    status.append(el('span', 'jp-taskcell-status-message', state.message));
  }
  status.title = state.address;
  root.append(status);
  if (state.snapshot && state.status === 'connected') {
    root.append(renderSnapshot(state.snapshot, Date.now() / 1000, actions));
  } else if (state.snapshot) {
    const stale = renderSnapshot(state.snapshot);
    stale.classList.add('jp-taskcell-stale');
    root.append(stale);
  }
  return root;
}

/**
 * What the cluster selector shows for a cluster: its notebooks, else its address (the status
 * line below it shows the address in full, where a narrow selector would cut it off).
 */
export function clusterLabel(info: IClusterInfo): string {
  const names = info.notebooks.map(n => n.path.split('/').pop() || n.path);
  return names.length ? names.join(', ') : info.address;
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

export function renderSuggestion(suggestion: ISuggestionInfo): HTMLElement {
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
