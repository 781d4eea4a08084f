/**
 * A background cell's failure arrives after its cell returned, as a display the kernel updates:
 * Jupyter sends no error into a cell that has finished. Its data carries the error
 * (`ERROR_MIME`, an `IErrorOutput`); here each such output becomes an error output of its
 * cell, so it is shown, and saved, as Jupyter shows and saves an error (nbclient and papermill
 * read a saved notebook's errors).
 */
import type { ICodeCellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';

import { ERROR_MIME, type IErrorOutput } from './api';

type Outputs = ICodeCellModel['outputs'];

/** The error an output carries, or null. */
export function carriedError(data: unknown): IErrorOutput | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const error = (data as Record<string, unknown>)[ERROR_MIME] as
    Partial<IErrorOutput> | undefined;
  if (
    typeof error?.ename !== 'string' ||
    typeof error.evalue !== 'string' ||
    !Array.isArray(error.traceback)
  ) {
    return null;
  }
  return {
    ename: error.ename,
    evalue: error.evalue,
    traceback: error.traceback.map(String)
  };
}

/** Replace each output of `outputs` that carries an error by that error. */
function asErrors(outputs: Outputs): void {
  for (let index = 0; index < outputs.length; index++) {
    const error = carriedError(outputs.get(index).data);
    if (error) {
      outputs.set(index, { output_type: 'error', ...error });
    }
  }
}

/** Turn carried errors into errors in every code cell of `panel`, now and as outputs change. */
export function showErrorsAsErrors(panel: NotebookPanel): void {
  const watched = new WeakSet<Outputs>();
  const watchCells = (): void => {
    for (const cell of panel.content.model?.cells ?? []) {
      if (cell.type !== 'code') {
        continue;
      }
      const outputs = (cell as ICodeCellModel).outputs;
      if (!watched.has(outputs)) {
        watched.add(outputs);
        outputs.changed.connect(() => asErrors(outputs));
        asErrors(outputs);
      }
    }
  };
  void panel.context.ready.then(() => {
    watchCells();
    panel.content.model?.cells.changed.connect(watchCells);
  });
}
