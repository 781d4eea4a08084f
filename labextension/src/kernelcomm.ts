/**
 * The kernel's side of the notebook: taskcell's panel (`taskcell.panel()`, an ipywidget) asks,
 * through a comm to target "taskcell", for its suggested `%%task` line in a new cell below the
 * active one. See taskcell/widgets/frontend.py for the kernel's side.
 */
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

export const COMM_TARGET = 'taskcell';

interface IInsertMessage {
  action?: unknown;
  source?: unknown;
}

function onComm(panel: NotebookPanel): (comm: Kernel.IComm) => void {
  return comm => {
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      const data = msg.content.data as IInsertMessage;
      const source = data.source;
      // Only a %%task line: the kernel may ask for a cell, never for arbitrary content.
      if (
        data.action !== 'insert-cell-below' ||
        typeof source !== 'string' ||
        !source.startsWith('%%task')
      ) {
        comm.send({ ok: false });
        return;
      }
      NotebookActions.insertBelow(panel.content);
      panel.content.activeCell?.model.sharedModel.setSource(source);
      comm.send({ ok: true });
    };
  };
}

/** Answer the taskcell comm on this notebook's kernel, now and after every kernel change. */
export function answerTaskcellComm(panel: NotebookPanel): void {
  const register = (): void => {
    panel.sessionContext.session?.kernel?.registerCommTarget(
      COMM_TARGET,
      onComm(panel)
    );
  };
  panel.sessionContext.kernelChanged.connect(register);
  void panel.sessionContext.ready.then(register);
  panel.disposed.connect(() =>
    panel.sessionContext.kernelChanged.disconnect(register)
  );
}
