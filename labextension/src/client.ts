import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type {
  ICancelResult,
  IClusterList,
  IClusterState,
  IErrorBody,
  IPlannerChoices,
  IResourcesClient,
  ISuggestionInfo,
  ISuggestionRequest
} from './api';

/** The REST API through Jupyter's own connection settings (token, XSRF, base URL). */
export class ResourcesClient implements IResourcesClient {
  constructor(settings?: ServerConnection.ISettings) {
    this._settings = settings ?? ServerConnection.makeSettings();
  }

  clusters(): Promise<IClusterList> {
    return this._request<IClusterList>('clusters');
  }

  cluster(
    id: string,
    since: number | null,
    timeout: number,
    signal?: AbortSignal
  ): Promise<IClusterState> {
    const query: Record<string, string> = { timeout: String(timeout) };
    if (since !== null) {
      query.since = String(since);
    }
    const path = `clusters/${encodeURIComponent(id)}${URLExt.objectToQueryString(query)}`;
    return this._request<IClusterState>(path, { signal });
  }

  cancel(id: string, key: string): Promise<ICancelResult> {
    return this._request<ICancelResult>(`clusters/${encodeURIComponent(id)}/cancel`, {
      method: 'POST',
      body: JSON.stringify({ key })
    });
  }

  plannerChoices(): Promise<IPlannerChoices> {
    return this._request<IPlannerChoices>('planner');
  }

  suggest(request: ISuggestionRequest): Promise<ISuggestionInfo> {
    return this._request<ISuggestionInfo>('planner', {
      method: 'POST',
      body: JSON.stringify(request)
    });
  }

  private async _request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const url = URLExt.join(this._settings.baseUrl, 'taskcell', 'api', path);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, init, this._settings);
    } catch (error) {
      if ((error as Error).name === 'AbortError') {
        throw error;
      }
      throw new ServerConnection.NetworkError(error as TypeError);
    }
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

  private _settings: ServerConnection.ISettings;
}
