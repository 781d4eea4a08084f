/**
 * What the sidebar opens and asks in JupyterLab: confirmation dialogs, a task's output, and the
 * dashboard's plots as main-area panels (as dask-labextension opens them).
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Dialog,
  MainAreaWidget,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import { IFrame } from '@jupyterlab/ui-components';
import React from 'react';

import { AnsiText } from './ansi';
import type { ITaskOutput } from './api';
import type { SidebarModel } from './model';
import type { IActions } from './occupancy';

/** A task's output and error, as the dialog shows them: as a terminal would (colours, and
 * `\r` redraws over one another). */
export function OutputBody(props: { output: ITaskOutput }): JSX.Element {
  const { output } = props;
  return (
    <div className="jp-taskcell-output-body">
      {output.worker && (
        <p className="jp-taskcell-output-worker">Ran on {output.worker}</p>
      )}
      {output.truncated && (
        <p className="jp-taskcell-more">
          The first part was cut: this is its end.
        </p>
      )}
      {output.text ? (
        <AnsiText className="jp-taskcell-output-text" text={output.text} />
      ) : (
        <p className="jp-taskcell-empty">It printed nothing.</p>
      )}
      {output.error && (
        <AnsiText className="jp-taskcell-output-error" text={output.error} />
      )}
    </div>
  );
}

export class LabActions implements IActions {
  constructor(app: JupyterFrontEnd) {
    this._app = app;
  }

  async confirm(title: string, body: string, accept: string): Promise<boolean> {
    const answer = await showDialog({
      title,
      body,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: accept })],
      defaultButton: 0 // Enter keeps things as they are
    });
    return answer.button.accept;
  }

  showOutput(model: SidebarModel, key: string, name: string): void {
    model.output(key).then(
      output =>
        void showDialog({
          title: `Output of ${name}`,
          body: <OutputBody output={output} />,
          buttons: [Dialog.okButton({ label: 'Close' })]
        }),
      error => void showErrorMessage(`Output of ${name}`, error as Error)
    );
  }

  openPlot(title: string, url: string): void {
    const frame = new IFrame({
      sandbox: ['allow-scripts', 'allow-same-origin', 'allow-popups']
    });
    frame.url = url;
    frame.addClass('jp-taskcell-plot-frame');
    const widget = new MainAreaWidget({ content: frame });
    widget.id = `taskcell-plot-${++this._plots}`;
    widget.title.label = title;
    widget.title.closable = true;
    this._app.shell.add(widget, 'main', { mode: 'split-right' });
  }

  private _app: JupyterFrontEnd;
  private _plots = 0;
}
