import type { ISignal } from '@lumino/signaling';
import type { Message } from '@lumino/messaging';
import { Panel, Widget } from '@lumino/widgets';

import type { IClusterInfo, IClusterState, IResourcesClient, ISnapshot } from './api';
import { PlannerForm } from './planner';
import { clusterLabel, pickCluster, renderState, type ITaskActions } from './render';

/** What the sidebar needs to know about the notebooks; `index.ts` implements it. */
export interface INotebookContext {
  /** The path of the notebook in focus, or null. */
  currentPath(): string | null;
  /** Emitted when the notebook in focus changes, or its kernel starts or ends a cell. */
  readonly changed: ISignal<unknown, void>;
  /** Put `line` at the top of the active code cell; false when there is none. */
  insertTaskLine(line: string): boolean;
}

/** Seconds one long poll may wait on the server. */
export const POLL_WAIT = 25;
/** The least time between two snapshots drawn (ms): a busy cluster redraws at most 4x/s. */
export const MIN_REDRAW = 250;
/** How often the list of clusters is refreshed while the sidebar is shown (ms). */
export const LIST_EVERY = 10000;
/** The least time between two list refreshes caused by notebook or kernel events (ms). */
export const CONTEXT_REFRESH = 1000;
/** How long to wait after a failed request before the next (ms). */
export const RETRY_AFTER = 3000;

const sleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms));

/** The keys of the tasks a snapshot shows running or waiting. */
function liveKeys(snapshot: ISnapshot | null): Set<string> {
  const tasks = snapshot ? [...snapshot.workers.flatMap(w => w.tasks), ...snapshot.queue] : [];
  return new Set(tasks.map(t => t.key));
}

/**
 * The live occupancy of one cluster: a cluster selector, the status line and the snapshot,
 * whose running and waiting tasks can be cancelled.
 *
 * Follows the cluster with long polls while it is shown, and stops (aborting the request in
 * flight) when it is hidden or disposed.
 */
export class OccupancyView extends Widget {
  constructor(client: IResourcesClient, context: INotebookContext) {
    super();
    this.addClass('jp-taskcell-occupancy');
    this._client = client;
    this._context = context;

    const header = document.createElement('div');
    header.className = 'jp-taskcell-header';
    const label = document.createElement('label');
    label.className = 'jp-taskcell-label';
    label.textContent = 'Cluster';
    this._select = document.createElement('select');
    this._select.className = 'jp-taskcell-cluster-select jp-mod-styled';
    label.append(this._select);
    header.append(label);
    this._notice = document.createElement('p');
    this._notice.className = 'jp-taskcell-notice';
    this._notice.setAttribute('role', 'alert');
    this._notice.hidden = true;
    this._body = document.createElement('div');
    this._body.className = 'jp-taskcell-body';
    this.node.append(header, this._notice, this._body);

    this._select.addEventListener('change', this._onSelect);
    context.changed.connect(this._onContextChanged, this);
  }

  /** The cluster shown now, or null. */
  get clusterId(): string | null {
    return this._clusterId;
  }

  /** The clusters the server listed last. */
  get clusters(): readonly IClusterInfo[] {
    return this._clusters;
  }

  /** The latest state drawn (for tests and the planner). */
  get state(): IClusterState | null {
    return this._state;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._stop();
    this._select.removeEventListener('change', this._onSelect);
    this._context.changed.disconnect(this._onContextChanged, this);
    super.dispose();
  }

  /** Fetch the cluster list and, if the cluster to show changed, follow the new one. */
  async refresh(): Promise<void> {
    let clusters: IClusterInfo[];
    try {
      clusters = (await this._client.clusters()).clusters;
    } catch (error) {
      this._showMessage(`Cannot list clusters: ${(error as Error).message}`, 'error');
      return;
    }
    if (this.isDisposed) {
      return;
    }
    this._clusters = clusters;
    const chosen = this._chosen && clusters.some(c => c.id === this._chosen) ? this._chosen : null;
    const pick = chosen
      ? clusters.find(c => c.id === chosen)!
      : pickCluster(clusters, this._context.currentPath(), null);
    this._fillSelect(clusters, pick?.id ?? null);
    this._follow(pick?.id ?? null);
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._start();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      this._start();
    }
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._stop();
  }

  protected onBeforeDetach(msg: Message): void {
    this._stop();
    super.onBeforeDetach(msg);
  }

  private _start(): void {
    if (this._active) {
      return;
    }
    this._active = true;
    this._listTimer = window.setInterval(() => void this.refresh(), LIST_EVERY);
    void this.refresh();
  }

  private _stop(): void {
    this._active = false;
    if (this._listTimer !== null) {
      window.clearInterval(this._listTimer);
      this._listTimer = null;
    }
    if (this._refreshTimer !== null) {
      window.clearTimeout(this._refreshTimer);
      this._refreshTimer = null;
    }
    this._abortPoll();
    this._following = null;
  }

  private _abortPoll(): void {
    this._generation++;
    this._abort?.abort();
    this._abort = null;
  }

  private _follow(id: string | null): void {
    if (id === null) {
      this._abortPoll();
      this._following = null;
      this._clusterId = null;
      this._state = null;
      this._showMessage(
        'No cluster yet. Run a %%task cell in a notebook, or name a scheduler with ' +
          'DASK_SCHEDULER_ADDRESS or c.TaskcellExtension.scheduler_addresses.',
        'empty'
      );
      return;
    }
    if (this._following === id && this._active) {
      return;
    }
    this._abortPoll();
    this._cancelling.clear();
    this._notice.hidden = true;
    this._clusterId = id;
    this._following = id;
    this._state = null;
    this._showMessage('Connecting to the scheduler…', 'connecting');
    if (this._active) {
      void this._poll(id, this._generation);
    }
  }

  private async _poll(id: string, generation: number): Promise<void> {
    let version: number | null = null;
    while (this._active && generation === this._generation) {
      const abort = new AbortController();
      this._abort = abort;
      try {
        const state = await this._client.cluster(id, version, POLL_WAIT, abort.signal);
        if (generation !== this._generation) {
          return;
        }
        version = state.version;
        this._draw(state);
        await sleep(MIN_REDRAW);
      } catch (error) {
        if (generation !== this._generation || (error as Error).name === 'AbortError') {
          return;
        }
        this._showMessage(`Lost the Jupyter server: ${(error as Error).message}`, 'error');
        version = null;
        await sleep(RETRY_AFTER);
      }
    }
  }

  /** Ask the server to stop the task `key` of the cluster shown; its button says so meanwhile. */
  async cancel(key: string): Promise<void> {
    const id = this._clusterId;
    if (id === null || this._cancelling.has(key)) {
      return;
    }
    this._cancelling.add(key);
    this._redraw();
    try {
      await this._client.cancel(id, key);
      this._notice.hidden = true;
    } catch (error) {
      this._cancelling.delete(key);
      this._notice.textContent = `Could not cancel ${key}: ${(error as Error).message}`;
      this._notice.hidden = false;
      this._redraw();
    }
  }

  private _draw(state: IClusterState): void {
    this._state = state;
    const live = liveKeys(state.snapshot);
    [...this._cancelling].filter(key => !live.has(key)).forEach(key => this._cancelling.delete(key));
    this._body.replaceChildren(renderState(state, this._actions));
  }

  private _redraw(): void {
    if (this._state && !this.isDisposed) {
      this._draw(this._state);
    }
  }

  private _showMessage(text: string, kind: string): void {
    const p = document.createElement('p');
    p.className = `jp-taskcell-message jp-taskcell-message-${kind}`;
    p.textContent = text;
    this._body.replaceChildren(p);
  }

  private _fillSelect(clusters: IClusterInfo[], selected: string | null): void {
    const options = clusters.map(c => {
      const option = document.createElement('option');
      option.value = c.id;
      option.textContent = clusterLabel(c);
      option.title = c.address;
      option.selected = c.id === selected;
      return option;
    });
    this._select.replaceChildren(...options);
    this._select.disabled = clusters.length === 0;
  }

  private _onSelect = (): void => {
    this._chosen = this._select.value || null;
    this._follow(this._chosen);
  };

  private _onContextChanged(): void {
    // A new notebook in focus: its own cluster wins again over an earlier choice.
    const path = this._context.currentPath();
    if (path !== this._path) {
      this._path = path;
      this._chosen = null;
    }
    if (this._active) {
      this._scheduleRefresh();
    }
  }

  /**
   * Refresh the list soon: at once, or a second after the last refresh when kernels report
   * busy and idle in a burst. The last event of a burst always gets its refresh: a kernel
   * records its cluster during a cell, and the idle at its end is what tells the sidebar.
   */
  private _scheduleRefresh(): void {
    if (this._refreshTimer !== null) {
      return;
    }
    const wait = Math.max(0, this._lastRefresh + CONTEXT_REFRESH - Date.now());
    this._refreshTimer = window.setTimeout(() => {
      this._refreshTimer = null;
      this._lastRefresh = Date.now();
      void this.refresh();
    }, wait);
  }

  private _client: IResourcesClient;
  private _context: INotebookContext;
  private _select: HTMLSelectElement;
  private _notice: HTMLParagraphElement;
  private _body: HTMLDivElement;
  private _cancelling = new Set<string>();
  private _actions: ITaskActions = {
    cancel: key => void this.cancel(key),
    cancelling: this._cancelling
  };
  private _clusters: IClusterInfo[] = [];
  private _clusterId: string | null = null;
  private _chosen: string | null = null;
  private _following: string | null = null;
  private _path: string | null = null;
  private _state: IClusterState | null = null;
  private _active = false;
  private _generation = 0;
  private _abort: AbortController | null = null;
  private _listTimer: number | null = null;
  private _lastRefresh = 0;
  private _refreshTimer: number | null = null;
}

/** The "Resources" sidebar: live occupancy above, the planner below. */
export class ResourcesPanel extends Panel {
  constructor(client: IResourcesClient, context: INotebookContext) {
    super();
    this.id = 'taskcell-resources';
    this.addClass('jp-taskcell-panel');
    this.title.caption = 'Resources: Dask workers and the preset planner';
    this.occupancy = new OccupancyView(client, context);
    this.planner = new PlannerForm(client, context, () => this.occupancy.clusterId);
    this.addWidget(this.occupancy);
    this.addWidget(this.planner);
  }

  readonly occupancy: OccupancyView;
  readonly planner: PlannerForm;
}
