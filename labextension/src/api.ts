/**
 * The JSON of `/taskcell/api/`, one interface per payload.
 *
 * The snapshot and the planner's answer are generated from `taskcell/planner/schema.py` into
 * `snapshot.ts` and re-exported here; the rest mirrors `taskcell/extension/payloads.py`
 * (change them together).
 */
import type { ISnapshot, ISuggestionInfo } from './snapshot';

export type {
  IEndedTask,
  IResourceUse,
  ISnapshot,
  ISuggestionInfo,
  ITaskInfo,
  IUsageStrip,
  IWorkerSnapshot,
  IWorkerVerdict,
  EndState,
  TaskState
} from './snapshot';

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

/**
 * `POST /taskcell/api/clusters/<id>/cancel` with `{key}`: the task stopped, and how. `was`
 * running: interrupted on its worker, its resources freed when its process ends; waiting:
 * cancelled before it started.
 */
export interface ICancelResult {
  key: string;
  was: 'running' | 'waiting';
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
  cancel(id: string, key: string): Promise<ICancelResult>;
  plannerChoices(): Promise<IPlannerChoices>;
  suggest(request: ISuggestionRequest): Promise<ISuggestionInfo>;
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
