/**
 * The sidebar's state and what it asks of the server, apart from how it is drawn.
 *
 * Three `Poll`s (`@lumino/polling`) keep it current, each in standby while the sidebar or the
 * page is hidden, each backing off after a failure: the cluster list, the long poll of the
 * cluster shown (the server answers at its next change, or after `POLL_WAIT` seconds), and a
 * one-second tick that makes durations grow between answers (`clock.ts`).
 */
import type { IDisposable } from '@lumino/disposable';
import { Poll, Throttler } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import type {
  IClusterInfo,
  IClusterState,
  IResourcesClient,
  ISnapshotView,
  ITaskOutput
} from './api';
import { SchedulerClock } from './clock';

/** What the sidebar needs to know about the notebooks; `index.ts` implements it. */
export interface INotebookContext {
  /** The path of the notebook in focus, or null. */
  currentPath(): string | null;
  /** Emitted when the notebook in focus changes, or its kernel starts or ends a cell. */
  readonly changed: ISignal<unknown, void>;
  /** Put `line` at the top of the active code cell; false when there is none. */
  insertTaskLine(line: string): boolean;
  /**
   * The bytes of the variable `name` of the current notebook's kernel (a DataFrame, an array,
   * as `taskcell.planner.sizing.input_size` measures it); null when the kernel has no such
   * variable, or there is no kernel. Rejects with the kernel's message for anything else.
   */
  measureVariable(name: string): Promise<number | null>;
  /** Whether the notebook in focus has a kernel to run code in. */
  hasKernel(): boolean;
  /**
   * Point the current notebook's kernel at the scheduler at `address` (`%task_cluster`); it
   * records the choice, so the server's next list names the notebook with that cluster.
   * Rejects with the kernel's error (an address it cannot reach) or when there is no kernel.
   */
  attachCluster(address: string): Promise<void>;
}

/** Seconds one long poll may wait on the server. */
export const POLL_WAIT = 25;
/** The least time between two answers drawn (ms): a busy cluster redraws at most 4x/s. */
export const MIN_REDRAW = 250;
/** How often the list of clusters is refreshed while the sidebar is shown (ms). */
export const LIST_EVERY = 10000;
/** The least time between two list refreshes caused by notebook or kernel events (ms). */
export const CONTEXT_REFRESH = 1000;
/** The longest wait between two attempts after failures (ms). */
export const BACKOFF_MAX = 30000;
/** How often durations tick (ms). */
export const TICK = 1000;

/** The keys of the tasks a view shows running or waiting. */
function liveKeys(view: ISnapshotView | null): Set<string> {
  const running = view
    ? view.groups.flatMap(g => g.workers.flatMap(w => w.running))
    : [];
  return new Set([...running, ...(view?.waiting ?? [])].map(t => t.key));
}

/** Where the sidebar stands, in one message: what to say when there is no state to draw. */
export type Notice = {
  kind: 'empty' | 'connecting' | 'error';
  text: string;
} | null;

/**
 * The clusters the server knows, the state of the one shown, and the actions on it.
 *
 * `changed` is emitted after anything that changes what is drawn; `ticked` every second with the
 * scheduler's time. `shown()` says whether the sidebar is visible: while it is not, nothing is
 * asked of the server.
 */
export class SidebarModel implements IDisposable {
  constructor(
    client: IResourcesClient,
    context: INotebookContext,
    shown: () => boolean
  ) {
    this.client = client;
    this.context = context;
    this._shown = shown;
    const standby = (): boolean | Poll.Standby =>
      !this._shown() || 'when-hidden';
    this._list = new Poll({
      name: 'taskcell:clusters',
      factory: () => this.refresh(),
      frequency: { interval: LIST_EVERY, backoff: true, max: BACKOFF_MAX },
      standby
    });
    this._ticker = new Poll({
      name: 'taskcell:tick',
      factory: async () => this._ticked.emit(this.clock.now()),
      frequency: { interval: TICK, backoff: false },
      standby
    });
    this._burst = new Throttler(() => this._list.refresh(), {
      limit: CONTEXT_REFRESH,
      edge: 'trailing'
    });
    context.changed.connect(this._onContextChanged, this);
  }

  readonly client: IResourcesClient;
  readonly context: INotebookContext;
  /** The scheduler's clock, as of the last answer. */
  readonly clock = new SchedulerClock();

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get ticked(): ISignal<this, number> {
    return this._ticked;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** The clusters the server listed last. */
  get clusters(): readonly IClusterInfo[] {
    return this._clusters;
  }

  /** The cluster shown now, or null. */
  get clusterId(): string | null {
    return this._clusterId;
  }

  /** The cluster the kernel of the notebook in focus uses, as the server listed last; or null. */
  get notebookClusterId(): string | null {
    return (
      notebookCluster(this._clusters, this.context.currentPath())?.id ?? null
    );
  }

  /** Whether the cluster shown is the one the notebook in focus uses. */
  get attached(): boolean {
    return (
      this._clusterId !== null && this._clusterId === this.notebookClusterId
    );
  }

  /**
   * Whether Attach can point the notebook in focus at the cluster shown: it has a kernel, and
   * uses another cluster or none.
   */
  get canAttach(): boolean {
    return (
      this._clusterId !== null && !this.attached && this.context.hasKernel()
    );
  }

  /** The latest state of the cluster shown. */
  get state(): IClusterState | null {
    return this._state;
  }

  /** What to say instead of a state (no cluster, connecting, the server lost). */
  get notice(): Notice {
    return this._notice;
  }

  /** The last action's failure, shown until the next one succeeds. */
  get error(): string | null {
    return this._error;
  }

  /** The keys asked to stop and not gone yet: their buttons are disabled. */
  get cancelling(): ReadonlySet<string> {
    return this._cancelling;
  }

  /** Whether an action on the cluster (start, attach, scale, stop, retire, start a pool's worker) is under way. */
  get busy(): boolean {
    return this._busy;
  }

  /** The sidebar was shown: ask at once rather than at the next tick. */
  wake(): void {
    void this._list.refresh();
    void this._follow?.refresh();
    void this._ticker.refresh();
  }

  /** Fetch the cluster list and, if the cluster to show changed, follow the new one. */
  async refresh(): Promise<void> {
    let clusters: IClusterInfo[];
    try {
      clusters = (await this.client.clusters()).clusters;
    } catch (error) {
      this._setNotice({
        kind: 'error',
        text: `Cannot list clusters: ${(error as Error).message}`
      });
      throw error;
    }
    if (this._disposed) {
      return;
    }
    this._clusters = clusters;
    const chosen = clusters.some(c => c.id === this._chosen)
      ? this._chosen
      : null;
    const pick =
      chosen ?? pickCluster(clusters, this.context.currentPath())?.id ?? null;
    this._showCluster(pick);
    this._changed.emit();
  }

  /** Show the cluster `id` whatever the notebook in focus, until the focus moves. */
  choose(id: string | null): void {
    this._chosen = id;
    this._showCluster(id);
    this._changed.emit();
  }

  /** Stop the task `key` of the cluster shown; its button says so meanwhile. */
  async cancel(key: string): Promise<void> {
    const id = this._clusterId;
    if (id === null || this._cancelling.has(key)) {
      return;
    }
    this._cancelling.add(key);
    this._changed.emit();
    if (
      !(await this._act(
        () => this.client.cancel(id, key),
        `Could not cancel ${key}`
      ))
    ) {
      this._cancelling.delete(key);
      this._changed.emit();
    }
  }

  /** Start an embedded cluster on the server, and show it. */
  async start(): Promise<void> {
    await this._act(async () => {
      const started = await this.client.start();
      this._chosen = started.id;
      await this.refresh();
    }, 'Could not start a cluster');
  }

  /**
   * Point the notebook in focus at the cluster shown (its kernel runs `%task_cluster`), then
   * list the clusters again: the server now names the notebook with this one.
   */
  async attach(): Promise<void> {
    const shown = this._clusters.find(c => c.id === this._clusterId);
    if (!shown) {
      return;
    }
    await this._act(async () => {
      await this.context.attachCluster(shown.address);
      this._chosen = shown.id;
      await this.refresh();
    }, `Could not attach the notebook to ${shown.address}`);
  }

  /** Give the cluster shown `workers` workers. */
  async scale(workers: number): Promise<void> {
    const id = this._clusterId;
    if (id !== null) {
      await this._act(
        () => this.client.scale(id, workers),
        `Could not scale to ${workers}`
      );
    }
  }

  /** Stop the cluster shown (the sidebar asks the user first). */
  async stop(): Promise<void> {
    const id = this._clusterId;
    if (id !== null) {
      await this._act(() => this.client.stop(id), 'Could not stop the cluster');
      void this._list.refresh();
    }
  }

  /** Retire the pool's worker at `address` (the sidebar asks the user first). */
  async retire(address: string): Promise<void> {
    const id = this._clusterId;
    if (id !== null) {
      await this._act(
        () => this.client.retire(id, address),
        `Could not retire ${address}`
      );
    }
  }

  /** Ask `kernel` for one more worker of its `pool` (nothing is stopped: no question). */
  async startWorker(kernel: string, pool: string): Promise<void> {
    const id = this._clusterId;
    if (id !== null) {
      await this._act(
        () => this.client.startWorker(id, kernel, pool),
        `Could not start a worker of pool ${pool}`
      );
    }
  }

  /** What the task `key` printed and raised. */
  output(key: string): Promise<ITaskOutput> {
    const id = this._clusterId;
    if (id === null) {
      return Promise.reject(new Error('no cluster is shown'));
    }
    return this.client.output(id, key);
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._stopFollowing();
    this._list.dispose();
    this._ticker.dispose();
    this._burst.dispose();
    this.context.changed.disconnect(this._onContextChanged, this);
    Signal.clearData(this);
  }

  private async _act(
    action: () => Promise<unknown>,
    failure: string
  ): Promise<boolean> {
    this._busy = true;
    this._changed.emit();
    try {
      await action();
      this._error = null;
      return true;
    } catch (error) {
      this._error = `${failure}: ${(error as Error).message}`;
      return false;
    } finally {
      this._busy = false;
      this._changed.emit();
    }
  }

  private _showCluster(id: string | null): void {
    if (id === null) {
      this._stopFollowing();
      this._clusterId = null;
      this._state = null;
      this._setNotice({
        kind: 'empty',
        text:
          'No cluster yet. Run a %%task cell in a notebook, start one here, or name a scheduler ' +
          'with DASK_SCHEDULER_ADDRESS or c.TaskcellExtension.scheduler_addresses.'
      });
      return;
    }
    if (id === this._clusterId && this._follow) {
      return;
    }
    this._stopFollowing();
    this._cancelling.clear();
    this._clusterId = id;
    this._state = null;
    this._error = null;
    this._setNotice({
      kind: 'connecting',
      text: 'Connecting to the scheduler…'
    });
    const abort = new AbortController();
    let version: number | null = null;
    this._abort = abort;
    this._follow = new Poll({
      name: `taskcell:cluster:${id}`,
      factory: async () => {
        try {
          const state = await this.client.cluster(
            id,
            version,
            POLL_WAIT,
            abort.signal
          );
          version = state.version;
          this._draw(state);
        } catch (error) {
          if (!abort.signal.aborted) {
            version = null;
            this._setNotice({
              kind: 'error',
              text: `Lost the Jupyter server: ${(error as Error).message}`
            });
          }
          throw error;
        }
      },
      frequency: { interval: MIN_REDRAW, backoff: true, max: BACKOFF_MAX },
      standby: () => !this._shown() || 'when-hidden'
    });
  }

  private _stopFollowing(): void {
    this._abort?.abort();
    this._abort = null;
    this._follow?.dispose();
    this._follow = null;
  }

  private _draw(state: IClusterState): void {
    if (this._disposed) {
      return;
    }
    this.clock.set(state.now);
    this._state = state;
    this._notice = null;
    const live = liveKeys(state.view);
    [...this._cancelling]
      .filter(key => !live.has(key))
      .forEach(key => this._cancelling.delete(key));
    this._changed.emit();
  }

  private _setNotice(notice: Notice): void {
    this._notice = notice;
    this._changed.emit();
  }

  private _onContextChanged(): void {
    // A new notebook in focus: its own cluster wins again over an earlier choice.
    const path = this.context.currentPath();
    if (path !== this._path) {
      this._path = path;
      this._chosen = null;
    }
    if (this._shown()) {
      void this._burst.invoke();
    }
  }

  private _shown: () => boolean;
  private _list: Poll;
  private _ticker: Poll;
  private _burst: Throttler;
  private _follow: Poll | null = null;
  private _abort: AbortController | null = null;
  private _changed = new Signal<this, void>(this);
  private _ticked = new Signal<this, number>(this);
  private _clusters: IClusterInfo[] = [];
  private _clusterId: string | null = null;
  private _chosen: string | null = null;
  private _path: string | null = null;
  private _state: IClusterState | null = null;
  private _notice: Notice = null;
  private _error: string | null = null;
  private _cancelling = new Set<string>();
  private _busy = false;
  private _disposed = false;
}

/** The mark after the label of the cluster the notebook in focus uses. */
export const THIS_NOTEBOOK = ' (this notebook)';

/**
 * What the cluster selector shows for a cluster: its notebooks, else its address (the status
 * line below it shows the address in full, where a narrow selector would cut it off); marked
 * when the notebook at `notebookPath` (the one in focus) uses it.
 */
export function clusterLabel(
  info: IClusterInfo,
  notebookPath: string | null = null
): string {
  const mine =
    notebookPath !== null && info.notebooks.some(n => n.path === notebookPath);
  return mine ? clusterName(info) + THIS_NOTEBOOK : clusterName(info);
}

/** A cluster by its notebooks, else by its address. */
function clusterName(info: IClusterInfo): string {
  const names = info.notebooks.map(n => n.path.split('/').pop() || n.path);
  if (names.length) {
    return names.join(', ');
  }
  return info.sources.includes('server')
    ? `started here · ${info.address}`
    : info.address;
}

/** The cluster the kernel of the notebook at `notebookPath` uses, or null. */
export function notebookCluster(
  clusters: readonly IClusterInfo[],
  notebookPath: string | null
): IClusterInfo | null {
  if (!notebookPath) {
    return null;
  }
  return (
    clusters.find(c => c.notebooks.some(n => n.path === notebookPath)) ?? null
  );
}

/** The cluster to show for `notebookPath`: its kernel's, else the first. */
export function pickCluster(
  clusters: readonly IClusterInfo[],
  notebookPath: string | null
): IClusterInfo | null {
  return notebookCluster(clusters, notebookPath) ?? clusters[0] ?? null;
}
