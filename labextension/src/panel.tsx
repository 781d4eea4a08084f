/**
 * The "Resources" sidebar: the cluster shown (controls, status, occupancy, what ended, the
 * timeline) above the planner. One React tree over two models: an update patches the DOM in
 * place, so focus, selection and hover survive it.
 */
import type { Message } from '@lumino/messaging';
import { ReactWidget } from '@jupyterlab/ui-components';
import React from 'react';

import type { IResourcesClient } from './api';
import { ClusterControls, ClusterHeader, StatusLine } from './cluster';
import { Ended, Timeline } from './history';
import { useSignal } from './hooks';
import { type INotebookContext, SidebarModel } from './model';
import { type IActions, Occupancy } from './occupancy';
import { Planner, PlannerModel } from './planner';

/** The cluster shown: its status, controls and view, or what to say instead. */
export function ClusterView(props: {
  model: SidebarModel;
  actions: IActions;
}): JSX.Element {
  const { model, actions } = props;
  useSignal(model.changed);
  const { state, notice } = model;
  const view = state?.view ?? null;
  return (
    <div className="jp-taskcell-occupancy">
      <ClusterHeader model={model} />
      {model.error && (
        <p className="jp-taskcell-notice" role="alert">
          {model.error}
        </p>
      )}
      {notice && (
        <p className={`jp-taskcell-message jp-taskcell-message-${notice.kind}`}>
          {notice.text}
        </p>
      )}
      {state && (
        <div className="jp-taskcell-state">
          <StatusLine state={state} />
          {state.status === 'connected' && (
            <ClusterControls model={model} state={state} actions={actions} />
          )}
          {view && (
            <div
              className={`jp-taskcell-snapshot${state.status === 'connected' ? '' : ' jp-taskcell-stale'}`}
            >
              <Occupancy model={model} view={view} actions={actions} />
              <Ended model={model} view={view} actions={actions} />
              <Timeline model={model} timeline={view.timeline} />
            </div>
          )}
        </div>
      )}
    </div>
  );
}

/** The sidebar widget. */
export class ResourcesPanel extends ReactWidget {
  constructor(
    client: IResourcesClient,
    context: INotebookContext,
    actions: IActions
  ) {
    super();
    this.id = 'taskcell-resources';
    this.addClass('jp-taskcell-panel');
    this.title.caption =
      'Resources: Dask workers, their tasks, and the preset planner';
    this.model = new SidebarModel(client, context, () => this.isVisible);
    this.planner = new PlannerModel(
      client,
      context,
      () => this.model.clusterId
    );
    this._actions = actions;
  }

  readonly model: SidebarModel;
  readonly planner: PlannerModel;

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.model.dispose();
    this.planner.dispose();
    super.dispose();
  }

  protected render(): JSX.Element {
    return (
      <>
        <ClusterView model={this.model} actions={this._actions} />
        <Planner model={this.planner} />
      </>
    );
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.model.wake();
  }

  private _actions: IActions;
}
