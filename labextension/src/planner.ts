import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import type { IResourcesClient, ISuggestionInfo } from './api';
import type { INotebookContext } from './panel';
import { renderSuggestion } from './render';

/**
 * The planner form: an input size and a workload profile in, the smallest preset that fits
 * out, with the workers of the cluster shown above that can run it, and a button that puts
 * its `%%task` line at the top of the active cell.
 */
export class PlannerForm extends Widget {
  constructor(
    client: IResourcesClient,
    context: INotebookContext,
    cluster: () => string | null
  ) {
    super();
    this.addClass('jp-taskcell-planner');
    this._client = client;
    this._context = context;
    this._cluster = cluster;

    const heading = document.createElement('h3');
    heading.className = 'jp-taskcell-heading';
    heading.textContent = 'Planner';

    this._form = document.createElement('form');
    this._form.className = 'jp-taskcell-planner-form';
    this._size = document.createElement('input');
    this._size.className = 'jp-taskcell-size jp-mod-styled';
    this._size.type = 'text';
    this._size.name = 'size';
    this._size.placeholder = 'input size, e.g. 12 GiB';
    this._size.setAttribute('aria-label', 'Estimated input size');
    this._profile = document.createElement('select');
    this._profile.className = 'jp-taskcell-profile jp-mod-styled';
    this._profile.name = 'profile';
    this._profile.setAttribute('aria-label', 'Workload profile');
    const submit = document.createElement('button');
    submit.type = 'submit';
    submit.className = 'jp-taskcell-suggest jp-mod-styled jp-mod-accept';
    submit.textContent = 'Suggest';
    this._form.append(this._size, this._profile, submit);

    this._result = document.createElement('div');
    this._result.className = 'jp-taskcell-planner-result';
    this._insert = document.createElement('button');
    this._insert.type = 'button';
    this._insert.className = 'jp-taskcell-insert jp-mod-styled';
    this._insert.textContent = 'Insert into the active cell';
    this._insert.title = 'Put the %%task line at the top of the active code cell';
    this._insert.hidden = true;
    this._note = document.createElement('p');
    this._note.className = 'jp-taskcell-planner-note';

    this.node.append(heading, this._form, this._result, this._insert, this._note);
    this._form.addEventListener('submit', this._onSubmit);
    this._insert.addEventListener('click', this._onInsert);
  }

  /** The suggestion shown now, if any. */
  get suggestion(): ISuggestionInfo | null {
    return this._suggestion;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._form.removeEventListener('submit', this._onSubmit);
    this._insert.removeEventListener('click', this._onInsert);
    super.dispose();
  }

  /** Ask the server for a suggestion for what the form holds now. */
  async suggest(): Promise<void> {
    this._note.textContent = '';
    const cluster = this._cluster();
    try {
      this._suggestion = await this._client.suggest({
        size: this._size.value,
        profile: this._profile.value,
        ...(cluster ? { cluster } : {})
      });
    } catch (error) {
      this._suggestion = null;
      this._insert.hidden = true;
      const p = document.createElement('p');
      p.className = 'jp-taskcell-planner-error';
      p.textContent = (error as Error).message;
      this._result.replaceChildren(p);
      return;
    }
    this._result.replaceChildren(renderSuggestion(this._suggestion));
    this._insert.hidden = !this._suggestion.line;
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this._loadChoices();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      void this._loadChoices();
    }
  }

  private async _loadChoices(): Promise<void> {
    if (this._choicesLoaded) {
      return;
    }
    this._choicesLoaded = true;
    try {
      const choices = await this._client.plannerChoices();
      this._profile.replaceChildren(
        ...choices.profiles.map(p => {
          const option = document.createElement('option');
          option.value = p.name;
          option.textContent = p.name;
          option.title = p.description;
          option.selected = p.name === choices.default_profile;
          return option;
        })
      );
    } catch (error) {
      this._choicesLoaded = false;
      this._note.textContent = `Cannot load the planner's profiles: ${(error as Error).message}`;
    }
  }

  private _onSubmit = (event: Event): void => {
    event.preventDefault();
    void this.suggest();
  };

  private _onInsert = (): void => {
    const line = this._suggestion?.line;
    if (!line) {
      return;
    }
    const done = this._context.insertTaskLine(line);
    this._note.textContent = done ? `Inserted ${line}` : 'Select a code cell in a notebook first.';
  };

  private _client: IResourcesClient;
  private _context: INotebookContext;
  private _cluster: () => string | null;
  private _form: HTMLFormElement;
  private _size: HTMLInputElement;
  private _profile: HTMLSelectElement;
  private _result: HTMLDivElement;
  private _insert: HTMLButtonElement;
  private _note: HTMLParagraphElement;
  private _suggestion: ISuggestionInfo | null = null;
  private _choicesLoaded = false;
}
