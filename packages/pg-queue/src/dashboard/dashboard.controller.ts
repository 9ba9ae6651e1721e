import { Controller, Get, Inject, Post, Req, Res, UseGuards, type CanActivate, type Type } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { PgQueueError } from '../errors/pg-queue.error.js';
import type { DashboardAction } from '../store/dashboard.store.js';
import { DASHBOARD_JS } from './assets/dashboard.client.js';
import { DASHBOARD_CSS } from './assets/dashboard.css.js';
import { field, fields, requestUrl, type AnyRequest } from './dashboard-http.js';
import { DashboardResponder, type AnyResponse } from './dashboard-responder.js';
import { DASHBOARD_OPTIONS } from './dashboard.constants.js';
import { DashboardService } from './dashboard.service.js';
import { waitingNote } from './dashboard-actions.js';
import type { ResolvedDashboardOptions } from './resolve-dashboard-options.js';
import { flowView } from './views/flow.view.js';
import { flowsView } from './views/flows.view.js';
import { jobView } from './views/job.view.js';
import { jobsView } from './views/jobs.view.js';
import { bulkQuestion, duplicateQuestion, flowQuestion, jobQuestion, SCHEDULE_ACTIONS, scheduleQuestion, selectedQuestion, type ScheduleAction } from './views/confirm-questions.js';
import { layout } from './views/layout.js';
import { overviewView } from './views/overview.view.js';
import { queueView } from './views/queue.view.js';
import { BIGINT_ID_DIGITS, isBigintId } from '../utils/bigint-id.js';
import { eventsQueryOf, flowsQueryOf, jobsQueryOf, lastSegment, newJobQueryOf, lastSegments, listedStatus, refuseNul, SELECTION_MAX } from './dashboard-params.js';
import { instancesView } from './views/instances.view.js';
import { schedulesView } from './views/schedules.view.js';
import { queueAction } from './dashboard-queue-actions.js';
import { eventsView } from './views/events.view.js';
import { html } from './views/html.js';
import { addJobOf } from './dashboard-add-job.js';
import { addJobQuestion, addJobView } from './views/add-job.view.js';
import { scheduleEditOf } from './dashboard-schedule-form.js';
import { scheduleEditQuestion, scheduleEditView } from './views/schedule-edit.view.js';

const JOB_ACTIONS = new Set<DashboardAction>(['retry', 'cancel', 'delete', 'run-now']);

/**
 * The dashboard's routes under `path`, as a class made per mount (Nest reads the path from the decorator). Access,
 * CSRF, confirmation, errors and the answer itself are the responder's (dashboard-responder.ts); each route here reads
 * its request, asks the service and picks the view.
 */
export function createDashboardController(path: string, guard?: Type<CanActivate>): Type {
  @Controller(path)
  @UseGuards(...(guard ? [guard] : []))
  class PgQueueDashboardController {
    private readonly http: DashboardResponder;

    constructor(
      @Inject(DashboardService) private readonly dashboard: DashboardService,
      @Inject(DASHBOARD_OPTIONS) options: ResolvedDashboardOptions,
      @Inject(HttpAdapterHost) adapterHost: HttpAdapterHost,
    ) {
      this.http = new DashboardResponder(dashboard, options, adapterHost);
    }

    @Get()
    overview(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.page(req, res, '', async (ctx) => overviewView(ctx, await this.dashboard.overview()));
    }

    @Get('api/summary')
    async summary(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      if (!(await this.http.enter(req, res, '/api/summary', false))) return;
      await this.http.guarded(res, null, async () => this.http.send(res, 200, 'application/json; charset=utf-8', JSON.stringify(await this.dashboard.summary())));
    }

    @Get('assets/dashboard.css')
    css(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.asset(req, res, '/assets/dashboard.css', 'text/css; charset=utf-8', DASHBOARD_CSS);
    }

    @Get('assets/dashboard.js')
    js(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.asset(req, res, '/assets/dashboard.js', 'text/javascript; charset=utf-8', DASHBOARD_JS);
    }

    @Get('jobs')
    jobs(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.page(req, res, '/jobs', async (ctx) => {
        const { filter, before, order, after } = jobsQueryOf(req);
        return jobsView(ctx, await this.dashboard.jobs(filter, before, order, after));
      });
    }

    // Before jobs/:id, which would take "new" for an id. ?from=<id> fills the form from that job (duplicate with changes).
    @Get('jobs/new')
    newJob(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.page(req, res, '/jobs/new', async (ctx) => {
        const { from, queue } = newJobQueryOf(req);
        const form = from === null ? { queue } : await this.dashboard.jobForm(from);
        if (!form) return [404, layout(ctx, 'jobs', `Job ${from}`, html`<p class="muted">No job ${from} to copy: never enqueued, or deleted.</p>`)];
        return addJobView(ctx, form, from);
      });
    }

    @Post('jobs/new')
    async addJob(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      await this.http.action(req, res, '/jobs/new', () => {
        const input = addJobOf(req);
        return {
          question: addJobQuestion(input.queue),
          run: async (viewer) => {
            const { id, duplicate, replaced } = await this.dashboard.addJob(viewer, input);
            return duplicate ? `No job added: job ${id} holds the unique key${replaced ? ' (its payload replaced)' : ''}.` : `Job ${id} added to queue ${input.queue}.`;
          },
        };
      });
    }

    @Get('jobs/:id')
    job(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const id = lastSegment(req);
      return this.http.page(req, res, `/jobs/${id}`, async (ctx) => {
        if (!BIGINT_ID_DIGITS.test(id)) throw new PgQueueError(`Not a job id: ${JSON.stringify(id)}.`);
        const found = isBigintId(id) ? await this.dashboard.job(id) : null; // past bigint: no such job
        if (!found) return [404, layout(ctx, 'jobs', `Job ${id}`, html`<p class="muted">No job ${id}: never enqueued, or deleted (the pruner deletes finished jobs after their retention).</p>`)];
        return jobView(ctx, found.row, found.now, found.flow, found.attempts, found.why, found.events);
      });
    }

    @Get('flows')
    flows(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.page(req, res, '/flows', async (ctx) => {
        const { status, before } = flowsQueryOf(req);
        return flowsView(ctx, await this.dashboard.flows(status, before));
      });
    }

    @Get('flows/:id')
    flow(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const id = lastSegment(req);
      return this.http.page(req, res, `/flows/${id}`, async (ctx) => {
        if (!BIGINT_ID_DIGITS.test(id)) throw new PgQueueError(`Not a flow id: ${JSON.stringify(id)}.`);
        const after = requestUrl(req).searchParams.get('after') || null;
        if (after !== null && !isBigintId(after)) throw new PgQueueError(`"after" must be a job id, got ${JSON.stringify(after)}.`);
        const found = isBigintId(id) ? await this.dashboard.flow(id, after) : null; // past bigint: no such flow
        if (!found) return [404, layout(ctx, 'flows', `Flow ${id}`, html`<p class="muted">No flow ${id}: never enqueued, or deleted (the pruner deletes a finished flow once its jobs are gone).</p>`)];
        return flowView(ctx, found);
      });
    }

    @Get('queues/:name')
    queue(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const name = lastSegment(req);
      return this.http.page(req, res, `/queues/${encodeURIComponent(name)}`, async (ctx) => {
        refuseNul('queue name', name);
        return queueView(ctx, await this.dashboard.queuePage(name));
      });
    }

    @Get('schedules')
    schedules(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.page(req, res, '/schedules', async (ctx) => schedulesView(ctx, await this.dashboard.schedules()));
    }

    @Get('schedules/:name/edit')
    editSchedule(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const [name] = lastSegments(req, 2);
      return this.http.page(req, res, `/schedules/${encodeURIComponent(name)}/edit`, async (ctx) => {
        refuseNul('schedule name', name);
        const found = await this.dashboard.scheduleForm(name);
        if (!found) return [404, layout(ctx, 'schedules', `Schedule ${name}`, html`<p class="muted">No schedule ${name}: removed, or never set.</p>`)];
        return scheduleEditView(ctx, name, found.source, found.form);
      });
    }

    // The recorded event stream, newest first (issue 43).
    @Get('events')
    events(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.page(req, res, '/events', async (ctx) => eventsView(ctx, await this.dashboard.events(eventsQueryOf(req))));
    }

    @Get('instances')
    instances(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      return this.http.page(req, res, '/instances', async (ctx) => instancesView(ctx, await this.dashboard.instances()));
    }

    @Post('jobs/bulk/:action')
    async bulk(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const action = lastSegment(req) as DashboardAction;
      await this.http.action(req, res, `/jobs/bulk/${action}`, () => {
        if (!JOB_ACTIONS.has(action)) throw new PgQueueError(`Unknown action ${JSON.stringify(action)}.`);
        const queue = field(req, 'queue')?.trim() || null;
        refuseNul('queue filter', queue);
        const status = listedStatus(field(req, 'status'));
        if (!queue && !status) throw new PgQueueError('A bulk action needs a queue or a status to filter on.');
        return {
          question: bulkQuestion(action, queue, status),
          run: async (viewer) => {
            const { changed, more, waiting } = await this.dashboard.act(viewer, action, { queue, status });
            return `${action}: ${changed} job${changed === 1 ? '' : 's'} changed${more ? '; stopped after 5 s, run it again for the rest' : ''}.${waitingNote(waiting)}`;
          },
        };
      });
    }

    // Before jobs/:id/:action, which would take "selected" for an id.
    @Post('jobs/selected/:action')
    async selectedAction(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const action = lastSegment(req) as DashboardAction;
      await this.http.action(req, res, `/jobs/selected/${action}`, () => {
        if (!JOB_ACTIONS.has(action)) throw new PgQueueError(`Unknown action ${JSON.stringify(action)}.`);
        const ids = [...new Set(fields(req, 'id'))];
        if (ids.length === 0) throw new PgQueueError('No job selected: tick the jobs to act on first.');
        if (ids.length > SELECTION_MAX) throw new PgQueueError(`At most ${SELECTION_MAX} jobs can be selected at once, got ${ids.length}.`);
        const bad = ids.find((id) => !isBigintId(id));
        if (bad !== undefined) throw new PgQueueError(`Not a job id: ${JSON.stringify(bad)}.`);
        return {
          question: selectedQuestion(action, ids),
          run: async (viewer) => {
            const { changed, waiting } = await this.dashboard.act(viewer, action, { ids });
            const others = changed + waiting.length < ids.length ? ' (the others are in a status it does not change, or gone)' : '';
            return `${action}: ${changed} of ${ids.length} selected job${ids.length === 1 ? '' : 's'} changed${others}.${waitingNote(waiting)}`;
          },
        };
      });
    }

    // Before jobs/:id/:action, which would take "duplicate" for an action of the store.
    @Post('jobs/:id/duplicate')
    async duplicate(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const [id] = lastSegments(req, 2);
      await this.http.action(req, res, `/jobs/${id}/duplicate`, () => {
        if (!isBigintId(id)) throw new PgQueueError(`Not a job id: ${JSON.stringify(id)}.`);
        return {
          question: duplicateQuestion(id),
          run: async (viewer) => {
            const outcome = await this.dashboard.duplicate(viewer, id);
            if (!outcome) return `Job ${id}: nothing to duplicate (it is gone).`;
            return 'copy' in outcome ? `Job ${id} duplicated: the copy is job ${outcome.copy}.` : `Job ${id} not duplicated: ${outcome.refused}.`;
          },
        };
      });
    }

    @Post('jobs/:id/:action')
    async jobAction(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const [id, action] = lastSegments(req, 2) as [string, DashboardAction];
      await this.http.action(req, res, `/jobs/${id}/${action}`, () => {
        if (!isBigintId(id)) throw new PgQueueError(`Not a job id: ${JSON.stringify(id)}.`);
        if (!JOB_ACTIONS.has(action)) throw new PgQueueError(`Unknown action ${JSON.stringify(action)}.`);
        return {
          question: jobQuestion(action, id),
          run: async (viewer) => {
            const { changed, waiting } = await this.dashboard.act(viewer, action, { ids: [id] });
            if (changed) return `Job ${id}: ${action} done.`;
            if (waiting.length > 0) return `Job ${id}: not retried: it waits for its parent job ${waiting[0].parent}, which has not completed (or is gone); retry the parent, and this job comes back with it when its flow failed because of it.`;
            return `Job ${id}: nothing to ${action} (its status does not allow it, or it is gone).`;
          },
        };
      });
    }

    @Post('flows/:id/:action')
    async flowAction(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const [id, action] = lastSegments(req, 2);
      await this.http.action(req, res, `/flows/${id}/${action}`, () => {
        if (!isBigintId(id)) throw new PgQueueError(`Not a flow id: ${JSON.stringify(id)}.`);
        if (action !== 'cancel') throw new PgQueueError(`Unknown action ${JSON.stringify(action)}.`);
        return {
          // The question names the flow by id only: the name would cost a read before the confirmation page.
          question: flowQuestion(id, null),
          run: async (viewer) => {
            const outcome = await this.dashboard.cancelFlow(viewer, id);
            return outcome
              ? `Flow ${id} cancelled: ${outcome.cancelled} job${outcome.cancelled === 1 ? '' : 's'} cancelled${outcome.signalled ? `, ${outcome.signalled} running one${outcome.signalled === 1 ? '' : 's'} told to abort` : ''}.`
              : `Flow ${id}: nothing to cancel (it had finished, or it is gone).`;
          },
        };
      });
    }

    @Post('queues/:name/:action')
    async queueAction(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const [name, action] = lastSegments(req, 2);
      await this.http.action(req, res, `/queues/${encodeURIComponent(name)}/${action}`, () => queueAction(this.dashboard, req, name, action));
    }

    @Post('schedules/:name/:action')
    async scheduleAction(@Req() req: AnyRequest, @Res() res: AnyResponse) {
      const [name, action] = lastSegments(req, 2);
      await this.http.action(req, res, `/schedules/${encodeURIComponent(name)}/${action}`, () => {
        if (action === 'edit') {
          const edit = scheduleEditOf(name, req);
          return {
            question: scheduleEditQuestion(name, field(req, 'source') ?? 'runtime'),
            run: async (viewer) => {
              const info = await this.dashboard.editSchedule(viewer, edit);
              return `Schedule ${name} saved${info.nextFireAt ? `: next fire ${info.nextFireAt.toISOString()}` : `: it has ended (${info.ended})`}${info.paused ? ' (paused)' : ''}.`;
            },
          };
        }
        if (!SCHEDULE_ACTIONS.includes(action as ScheduleAction)) throw new PgQueueError(`Unknown action ${JSON.stringify(action)}.`);
        const act = action as ScheduleAction;
        return {
          question: scheduleQuestion(act, name, field(req, 'source') === 'code' ? 'code' : 'runtime'),
          run: async (viewer) => {
            const { found, job } = await this.dashboard.scheduleAction(viewer, name, act);
            if (!found) return `No schedule ${name}.`;
            return act === 'fire' ? `Schedule ${name} fired: job ${job} enqueued.` : `Schedule ${name} ${act === 'remove' ? 'removed' : `${act}d`}.`;
          },
        };
      });
    }
  }
  return PgQueueDashboardController;
}
