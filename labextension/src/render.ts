/**
 * Snapshot -> DOM, with no JupyterLab in sight: the sidebar calls these, the unit tests too.
 *
 * What is shown, in which order and in which words, is `snapshotView` (`view.ts`, the same
 * rules as the notebook panel's); this module only draws it.
 */
import type { IClusterInfo, IClusterState, ISnapshot, ISuggestionInfo } from './api';
import type { IBarView, IGroupView, ITaskView, IWorkerView } from './snapshot';
import { snapshotView } from './view';

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
  row.append(el('span', 'jp-taskcell-resource-name', view.resource));

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

/** A task's line; `where` only outside its worker's box. */
function renderTask(task: ITaskView, where: boolean): HTMLElement {
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
  if (task.waiting_for) {
    item.append(el('span', 'jp-taskcell-task-reason', task.waiting_for));
  }
  item.title = task.key;
  return item;
}

function renderTasks(tasks: ITaskView[], where: boolean): HTMLElement {
  const list = el('ul', 'jp-taskcell-tasks');
  tasks.forEach(task => list.append(renderTask(task, where)));
  return list;
}

export function renderWorker(worker: IWorkerView): HTMLElement {
  const box = el('div', 'jp-taskcell-worker');
  box.dataset.address = worker.address;
  box.dataset.name = worker.name;
  box.classList.toggle('jp-taskcell-worker-busy', worker.busy);
  const head = el('div', 'jp-taskcell-worker-head', worker.name);
  head.title = worker.address;
  box.append(head, ...worker.bars.map(renderBar));
  if (worker.running.length) {
    box.append(renderTasks(worker.running, false));
  }
  const counts = [worker.more_running, worker.waiting].filter(Boolean).join(' · ');
  if (counts) {
    box.append(el('p', 'jp-taskcell-more', counts));
  } else if (!worker.running.length) {
    box.append(el('p', 'jp-taskcell-empty', 'idle'));
  }
  return box;
}

function renderGroup(group: IGroupView): HTMLElement {
  const box = el('div', 'jp-taskcell-group');
  box.append(el('h4', 'jp-taskcell-group-title', group.title));
  group.workers.forEach(w => box.append(renderWorker(w)));
  if (group.folded) {
    box.append(el('p', 'jp-taskcell-more jp-taskcell-folded', group.folded));
  }
  return box;
}

/** The snapshot as the notebook panel shows it too; `now` (Unix seconds) dates the waits. */
export function renderSnapshot(snapshot: ISnapshot, now: number = Date.now() / 1000): HTMLElement {
  const view = snapshotView(snapshot, now);
  const root = el('div', 'jp-taskcell-snapshot');

  const totals = el('section', 'jp-taskcell-totals');
  totals.append(el('p', 'jp-taskcell-summary', view.summary), ...view.totals.map(renderBar));
  root.append(totals);

  const workers = el('section', 'jp-taskcell-workers');
  if (view.no_workers) {
    workers.append(el('p', 'jp-taskcell-empty', view.no_workers));
  }
  view.groups.forEach(group => workers.append(renderGroup(group)));
  root.append(workers);

  const queue = el('section', 'jp-taskcell-queue');
  queue.append(el('h3', 'jp-taskcell-heading', view.waiting_title));
  if (view.waiting.length) {
    queue.append(renderTasks(view.waiting, true));
  }
  if (view.waiting_note) {
    const kind = view.waiting.length ? 'jp-taskcell-more' : 'jp-taskcell-empty';
    queue.append(el('p', kind, view.waiting_note));
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
