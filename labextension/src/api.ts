/**
 * The JSON of `/taskcell/api/`, one interface per payload.
 *
 * Mirrors `taskcell/planner/schema.py` (the snapshot) and `taskcell/extension/payloads.py`
 * (the rest); change them together.
 */

/** running: executing on a worker; assigned: on a worker, waiting there; queued: no worker yet. */
export type TaskState = 'running' | 'assigned' | 'queued';

/** One resource on one worker, or summed over the cluster. Never negative. */
export interface IResourceUse {
  resource: string;
  total: number;
  running: number;
  assigned: number;
}

/** A task that holds, or waits for, resources. */
export interface ITaskInfo {
  key: string;
  name: string;
  request: Record<string, number>;
  state: TaskState;
  since: number;
  worker: string | null;
  waiting_for: string | null;
}

export interface IWorkerSnapshot {
  address: string;
  name: string;
  nthreads: number;
  /** Dask's memory limit in bytes (0: none). */
  memory_limit: number;
  resources: IResourceUse[];
  /** Every running task and the ten oldest assigned ones. */
  tasks: ITaskInfo[];
  running_tasks: number;
  assigned_tasks: number;
}

export interface ISnapshot {
  scheduler: string;
  time: number;
  /** Grows by one with every change the scheduler publishes. */
  seq: number;
  workers: IWorkerSnapshot[];
  totals: IResourceUse[];
  /** At most 100 tasks; `queued` counts them all. */
  queue: ITaskInfo[];
  queued: number;
}

/** How the server's one subscription to a scheduler stands. */
export type LinkStatus = 'connecting' | 'connected' | 'unreachable' | 'error';

export interface INotebookRef {
  path: string;
  name: string;
  kernel_id: string;
}

export interface IClusterInfo {
  id: string;
  address: string;
  sources: Array<'kernel' | 'config'>;
  notebooks: INotebookRef[];
  kernels: string[];
  status: LinkStatus | null;
}

export interface IClusterList {
  clusters: IClusterInfo[];
}

/** `GET /taskcell/api/clusters/<id>`; `?since=<version>` waits for the next version. */
export interface IClusterState {
  id: string;
  address: string;
  status: LinkStatus;
  message: string | null;
  version: number;
  updated: number;
  snapshot: ISnapshot | null;
}

export interface IProfile {
  name: string;
  description: string;
}

/** `GET /taskcell/api/planner`. */
export interface IPlannerChoices {
  profiles: IProfile[];
  default_profile: string;
}

/** `POST /taskcell/api/planner`. */
export interface ISuggestionRequest {
  size: string;
  profile: string;
  cluster?: string;
}

/** Whether one live worker can run a suggested request, and if not, what it lacks. */
export interface IWorkerVerdict {
  address: string;
  name: string;
  able: boolean;
  reason: string;
}

/** The planner's answer (`SuggestionInfo` in `taskcell/planner/schema.py`). */
export interface ISuggestion {
  size: number;
  profile: string;
  memory: number;
  disk: number;
  gpu: string | null;
  /** null when no preset fits; `line` is then a custom `%%task` line, or null. */
  preset: string | null;
  request: Record<string, unknown> | null;
  line: string | null;
  fits: boolean;
  message: string;
  /** Empty when no cluster was named. */
  workers: IWorkerVerdict[];
}

/** Every 4xx/5xx body. */
export interface IErrorBody {
  message: string;
  reason: string | null;
}

/** What the sidebar needs from the server; `client.ts` implements it over HTTP. */
export interface IResourcesClient {
  clusters(): Promise<IClusterList>;
  cluster(
    id: string,
    since: number | null,
    timeout: number,
    signal?: AbortSignal
  ): Promise<IClusterState>;
  plannerChoices(): Promise<IPlannerChoices>;
  suggest(request: ISuggestionRequest): Promise<ISuggestion>;
}

/** Where an exported module runs (`TARGETS` in `taskcell/export/__init__.py`). */
export type ExportTarget = 'dask' | 'flyte' | 'latch';

/** `POST /taskcell/api/export`: a notebook, named as the contents API names it. */
export interface IExportRequest {
  path: string;
  /** `'dask'` when left out. */
  target?: ExportTarget;
  /**
   * Replace a file at the module's path that taskcell did not write; without it the server
   * answers 409 and writes nothing. A module taskcell wrote is replaced either way.
   */
  overwrite?: boolean;
}

/** The module written beside the notebook (`ExportResult` in `export_handler.py`). */
export interface IExportResult {
  /** Relative to the server's root, as the contents API names it. */
  path: string;
  target: ExportTarget;
  /** Whether a file was there before: an earlier export, or any file with `overwrite`. */
  replaced: boolean;
  /** One sentence per cell part kept only as a comment, naming the cell. */
  warnings: string[];
}
