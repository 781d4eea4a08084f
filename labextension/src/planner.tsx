/**
 * The planner form: what the notebook panel's planner takes, with the same answers. An input (a
 * size such as `12 GiB`, files or globs beside the notebook, or the name of one of its
 * variables, a DataFrame say, measured by its kernel) and a workload profile in; the smallest
 * preset that fits out, which workers of the cluster shown can run it, and a button that puts
 * its `%%task` line atop the active cell. Its answer and its error belong to one notebook: they
 * go when another comes into focus.
 */
import { ISignal, Signal } from '@lumino/signaling';
import React, { useEffect, useState } from 'react';

import type {
  IPlannerChoices,
  IResourcesClient,
  ISuggestionInfo,
  ISuggestionRequest
} from './api';
import { useSignal } from './hooks';
import type { INotebookContext } from './model';

/** A name a notebook's variable may have: measured by its kernel rather than the server. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The planner's state: the profiles, and the last answer or error, for one notebook. */
export class PlannerModel {
  constructor(
    client: IResourcesClient,
    context: INotebookContext,
    cluster: () => string | null
  ) {
    this._client = client;
    this._context = context;
    this._cluster = cluster;
    this._path = context.currentPath();
    context.changed.connect(this._onContext, this);
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get choices(): IPlannerChoices | null {
    return this._choices;
  }

  get suggestion(): ISuggestionInfo | null {
    return this._suggestion;
  }

  get error(): string | null {
    return this._error;
  }

  get note(): string {
    return this._note;
  }

  get busy(): boolean {
    return this._busy;
  }

  /** Load the profiles once. */
  async loadChoices(): Promise<void> {
    if (this._choices) {
      return;
    }
    try {
      this._choices = await this._client.plannerChoices();
    } catch (error) {
      this._note = `Cannot load the planner's profiles: ${(error as Error).message}`;
    }
    this._changed.emit();
  }

  /** Ask for a suggestion for `input` and `profile`. */
  async suggest(input: string, profile: string): Promise<void> {
    const notebook = this._context.currentPath();
    this._busy = true;
    this._note = '';
    this._changed.emit();
    try {
      let size: string | number = input;
      const name = input.trim();
      if (IDENTIFIER.test(name)) {
        size = (await this._context.measureVariable(name)) ?? input;
      }
      const request: ISuggestionRequest = { size, profile };
      const cluster = this._cluster();
      if (cluster) {
        request.cluster = cluster;
      }
      if (notebook) {
        request.notebook = notebook;
      }
      const suggestion = await this._client.suggest(request);
      if (notebook === this._path) {
        this._suggestion = suggestion;
        this._error = null;
      }
    } catch (error) {
      if (notebook === this._path) {
        this._suggestion = null;
        this._error = (error as Error).message;
      }
    } finally {
      this._busy = false;
      this._changed.emit();
    }
  }

  /** Put the suggested line atop the active cell. */
  insert(): void {
    const line = this._suggestion?.line;
    if (line) {
      const done = this._context.insertTaskLine(line);
      this._note = done
        ? `Inserted ${line}`
        : 'Select a code cell in a notebook first.';
      this._changed.emit();
    }
  }

  dispose(): void {
    this._context.changed.disconnect(this._onContext, this);
    Signal.clearData(this);
  }

  private _onContext(): void {
    const path = this._context.currentPath();
    if (path !== this._path) {
      this._path = path;
      this._suggestion = null;
      this._error = null;
      this._note = '';
      this._changed.emit();
    }
  }

  private _client: IResourcesClient;
  private _context: INotebookContext;
  private _cluster: () => string | null;
  private _path: string | null;
  private _choices: IPlannerChoices | null = null;
  private _suggestion: ISuggestionInfo | null = null;
  private _error: string | null = null;
  private _note = '';
  private _busy = false;
  private _changed = new Signal<this, void>(this);
}

function Suggestion(props: { suggestion: ISuggestionInfo }): JSX.Element {
  const { suggestion } = props;
  const able = suggestion.workers.filter(w => w.able);
  return (
    <div
      className={`jp-taskcell-suggestion${suggestion.fits ? '' : ' jp-taskcell-suggestion-nofit'}`}
      data-preset={suggestion.preset ?? ''}
    >
      <div className="jp-taskcell-suggestion-summary">{suggestion.message}</div>
      {suggestion.line && (
        <code className="jp-taskcell-task-line">{suggestion.line}</code>
      )}
      {suggestion.workers.length > 0 && (
        <>
          <div className="jp-taskcell-fit-count">
            {`${able.length} of ${suggestion.workers.length} live workers can run it`}
          </div>
          <ul className="jp-taskcell-fits">
            {suggestion.workers.map(w => (
              <li
                key={w.address}
                className={w.able ? 'jp-taskcell-fit' : 'jp-taskcell-nofit'}
                title={w.address}
              >
                {w.able
                  ? `${w.name || w.address}: can run it`
                  : `${w.name || w.address}: ${w.reason}`}
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}

/** The planner form, its answer or error, and the insert button. */
export function Planner(props: { model: PlannerModel }): JSX.Element {
  const { model } = props;
  useSignal(model.changed);
  const [input, setInput] = useState('');
  const [profile, setProfile] = useState('');
  useEffect(() => {
    void model.loadChoices();
  }, [model]);
  const choices = model.choices;
  const chosen = profile || choices?.default_profile || '';
  return (
    <div className="jp-taskcell-planner">
      <h3 className="jp-taskcell-heading">Planner</h3>
      <form
        className="jp-taskcell-planner-form"
        onSubmit={e => {
          e.preventDefault();
          void model.suggest(input, chosen);
        }}
      >
        <input
          type="text"
          name="size"
          className="jp-taskcell-size jp-mod-styled"
          placeholder="12 GiB, data/*.parquet, or a variable (df)"
          aria-label="Estimated input: a size, files beside the notebook, or a variable"
          value={input}
          onChange={e => setInput(e.target.value)}
        />
        <select
          name="profile"
          className="jp-taskcell-profile jp-mod-styled"
          aria-label="Workload profile"
          value={chosen}
          onChange={e => setProfile(e.target.value)}
        >
          {choices?.profiles.map(p => (
            <option key={p.name} value={p.name} title={p.description}>
              {p.name}
            </option>
          ))}
        </select>
        <button
          type="submit"
          className="jp-taskcell-suggest jp-mod-styled jp-mod-accept"
          disabled={model.busy}
        >
          Suggest
        </button>
      </form>
      <div className="jp-taskcell-planner-result">
        {model.error && (
          <p className="jp-taskcell-planner-error">{model.error}</p>
        )}
        {model.suggestion && <Suggestion suggestion={model.suggestion} />}
      </div>
      {model.suggestion?.line && (
        <button
          type="button"
          className="jp-taskcell-insert jp-mod-styled"
          title="Put the %%task line at the top of the active code cell"
          onClick={() => model.insert()}
        >
          Insert into the active cell
        </button>
      )}
      <p className="jp-taskcell-planner-note">{model.note}</p>
    </div>
  );
}
