/**
 * The JSON of `/taskcell/api/`, and what the sidebar needs from the server.
 *
 * Every payload is generated from the Python that writes it (`generated.ts`, `make generate`):
 * the snapshot (`taskcell/planner/schema.py`), its view (`taskcell/planner/view.py`) and the
 * REST bodies (`taskcell/extension/payloads.py`). Only the requests the browser writes, and the
 * client's interface, are declared here.
 */
import type {
  ICancelResult,
  IClusterList,
  IClusterState,
  IRetireResult,
  IScaleResult,
  IStartedCluster,
  IStartWorkerResult,
  IStopResult,
  ISuggestionInfo,
  ITaskOutput
} from './generated';

export * from './generated';

export interface IProfile {
  name: string;
  description: string;
}

/** `GET /taskcell/api/planner`. */
export interface IPlannerChoices {
  profiles: IProfile[];
  default_profile: string;
}

/**
 * `POST /taskcell/api/planner`: `size` a quantity, a number of bytes, or paths and globs
 * relative to `notebook`'s folder.
 */
export interface ISuggestionRequest {
  size: string | number;
  profile: string;
  cluster?: string;
  notebook?: string;
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
  start(): Promise<IStartedCluster>;
  cancel(id: string, key: string): Promise<ICancelResult>;
  scale(id: string, workers: number): Promise<IScaleResult>;
  stop(id: string): Promise<IStopResult>;
  retire(id: string, worker: string): Promise<IRetireResult>;
  startWorker(
    id: string,
    kernel: string,
    pool: string
  ): Promise<IStartWorkerResult>;
  output(id: string, key: string): Promise<ITaskOutput>;
  plannerChoices(): Promise<IPlannerChoices>;
  suggest(request: ISuggestionRequest): Promise<ISuggestionInfo>;
}

/** Where an exported module runs (`TARGETS` in `taskcell/export/__init__.py`). */
export type ExportTarget = 'dask' | 'flyte' | 'latch';

/** The targets, in the order offered. */
export const EXPORT_TARGETS: readonly ExportTarget[] = [
  'dask',
  'flyte',
  'latch'
];

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
