/**
 * The JSON of `/taskcell/api/`, and what the sidebar needs from the server.
 *
 * Every payload is generated from the Python that writes it (`generated.ts`, `make generate`):
 * the snapshot (`taskcell/planner/schema.py`), its view (`taskcell/planner/view.py`) and the
 * REST bodies, the requests the browser writes included (`taskcell/extension/payloads.py`). Only
 * the client's interface is declared here.
 */
import type {
  ICancelResult,
  IClusterList,
  IClusterState,
  IRetireResult,
  IScaleResult,
  IStartedCluster,
  IStartWorkerResult,
  IPlannerChoices,
  IStopResult,
  ISuggestionInfo,
  ISuggestionRequest,
  ITaskOutput
} from './generated';

export * from './generated';

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
