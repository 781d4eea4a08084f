import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type {
  ICancelResult,
  IClusterList,
  IClusterState,
  IErrorBody,
  IPlannerChoices,
  IResourcesClient,
  IRetireResult,
  IScaleResult,
  IStartedCluster,
  IStartWorkerResult,
  IStopResult,
  ISuggestionInfo,
  ISuggestionRequest,
  ITaskOutput
} from './api';

/** Read a JSON reply; a 4xx/5xx becomes a `ResponseError` carrying the server's message. */
export async function readReply<T>(response: Response): Promise<T> {
  const text = await response.text();
  let data: unknown = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { message: text, reason: null };
    }
  }
  if (!response.ok) {
    const message = (data as IErrorBody | null)?.message ?? response.statusText;
    throw new ServerConnection.ResponseError(response, message);
  }
  return data as T;
}

/** The REST API through Jupyter's own connection settings (token, XSRF, base URL). */
export class ResourcesClient implements IResourcesClient {
  constructor(settings?: ServerConnection.ISettings) {
    this.settings = settings ?? ServerConnection.makeSettings();
  }

  readonly settings: ServerConnection.ISettings;

  clusters(): Promise<IClusterList> {
    return this._request<IClusterList>('clusters');
  }

  cluster(
    id: string,
    since: number | null,
    timeout: number,
    signal?: AbortSignal
  ): Promise<IClusterState> {
    // The sidebar draws the view; the snapshot it is computed from stays on the server.
    const query: Record<string, string> = {
      timeout: String(timeout),
      snapshot: '0'
    };
    if (since !== null) {
      query.since = String(since);
    }
    const path = `${this._cluster(id)}${URLExt.objectToQueryString(query)}`;
    return this._request<IClusterState>(path, { signal });
  }

  start(): Promise<IStartedCluster> {
    return this._post<IStartedCluster>('clusters', {});
  }

  cancel(id: string, key: string): Promise<ICancelResult> {
    return this._post<ICancelResult>(`${this._cluster(id)}/cancel`, { key });
  }

  scale(id: string, workers: number): Promise<IScaleResult> {
    return this._post<IScaleResult>(`${this._cluster(id)}/scale`, { workers });
  }

  stop(id: string): Promise<IStopResult> {
    return this._post<IStopResult>(`${this._cluster(id)}/stop`, {});
  }

  retire(id: string, worker: string): Promise<IRetireResult> {
    return this._post<IRetireResult>(`${this._cluster(id)}/retire`, { worker });
  }

  startWorker(
    id: string,
    kernel: string,
    pool: string
  ): Promise<IStartWorkerResult> {
    return this._post<IStartWorkerResult>(`${this._cluster(id)}/start-worker`, {
      kernel,
      pool
    });
  }

  output(id: string, key: string): Promise<ITaskOutput> {
    return this._request<ITaskOutput>(
      `${this._cluster(id)}/tasks/${encodeURIComponent(key)}/output`
    );
  }

  plannerChoices(): Promise<IPlannerChoices> {
    return this._request<IPlannerChoices>('planner');
  }

  suggest(request: ISuggestionRequest): Promise<ISuggestionInfo> {
    return this._post<ISuggestionInfo>('planner', request);
  }

  private _cluster(id: string): string {
    return `clusters/${encodeURIComponent(id)}`;
  }

  private _post<T>(path: string, body: object): Promise<T> {
    return this._request<T>(path, {
      method: 'POST',
      body: JSON.stringify(body)
    });
  }

  private async _request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const url = URLExt.join(this.settings.baseUrl, 'taskcell', 'api', path);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, init, this.settings);
    } catch (error) {
      if ((error as Error).name === 'AbortError') {
        throw error;
      }
      throw new ServerConnection.NetworkError(error as TypeError);
    }
    return readReply<T>(response);
  }
}
