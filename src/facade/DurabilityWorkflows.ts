/**
 * `DurabilityWorkflows`: durable workflows for promise-style code, in the style of Cloudflare Workflows.
 * Every workflow name becomes a property: `workflows.signup.create({ params })`, `.get(id)`, `.list()`.
 * Many instances live in one object; a sleeping or waiting instance holds nothing but its rows.
 */
import type * as Effect from "effect/Effect"
import type { LifecycleHook } from "../engine/Lifecycle.js"
import type * as Scheduler from "../engine/Scheduler.js"
import type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
import type { WorkflowDefinition } from "../workflows/participant.js"
import type {
  WorkflowEvent,
  WorkflowInstanceInfo,
  WorkflowListOptions,
  WorkflowPage,
  WorkflowStep,
  WorkflowStepInfo
} from "../workflows/types.js"
import * as Workflows from "../workflows/Workflows.js"
import type { CallDuration } from "../shared/duration.js"
import { migrateWith, type MigrationResult, type SchedulerAttachment } from "./attachment.js"
import { toError } from "./errors.js"
import { build, type DurabilityMethodOptions, Helper, type HelperSpec, pickExecution } from "./helper.js"

/** A workflow's handler: replayed from the start on every run, so code between steps must be deterministic. */
export type WorkflowHandler<Params = unknown, Output = unknown> = (
  event: WorkflowEvent<Params>,
  step: WorkflowStep
) => Output | Promise<Output>

/** A workflow handler whose `event` may be annotated with any params (checked where it is declared). */
export type BivariantWorkflow = {
  /** The workflow's handler. */
  handle(event: WorkflowEvent<never>, step: WorkflowStep): unknown
}["handle"]

/** What every workflow map is assignable to; annotate `event` (`WorkflowEvent<{ email: string }>`) to type params. */
export type WorkflowMap = Record<string, BivariantWorkflow>

/** The params a handler declares. */
export type WorkflowParamsOf<H> = H extends (event: WorkflowEvent<infer P>, step: WorkflowStep) => unknown ? P : unknown
/** What a handler returns, once awaited. */
export type WorkflowOutputOf<H> = H extends (event: never, step: WorkflowStep) => infer O ? Awaited<O> : unknown

/** One instance: its id, and what can be done with it. Every call reads or writes storage; the handle keeps nothing. */
export interface WorkflowInstance<Output = unknown> {
  /** The instance's id. */
  readonly id: string
  /** Its status, output or error, and its steps so far. */
  status(): Promise<WorkflowInstanceInfo<Output>>
  /** Lets the running step finish and starts nothing new until `resume`. */
  pause(): Promise<void>
  /** Goes on after `pause`: a waiting instance looks again at what it waits for. */
  resume(): Promise<void>
  /** Ends it: its running step's signal is aborted with `WorkflowTerminatedError`. */
  terminate(): Promise<void>
  /** Starts it over from its first step (its steps and events are deleted). */
  restart(): Promise<void>
  /**
   * Sends it an event: kept until the first `waitForEvent` of its type consumes it (even one reached later).
   * Rejects with `WorkflowNotFoundError` or `WorkflowFinishedError` when there is no live instance.
   */
  sendEvent(event: { readonly type: string; readonly payload?: unknown }): Promise<void>
  /** Waits up to `timeoutMs` for it to end; resolves with its status then. */
  wait(options: { readonly timeoutMs: CallDuration }): Promise<WorkflowInstanceInfo<Output>>
  /** A page of its steps, from position `from` (default 1). */
  steps(options?: { readonly from?: number | undefined; readonly limit?: number | undefined }): Promise<ReadonlyArray<WorkflowStepInfo>>
}

/** One workflow's calls: `workflows.signup.create(...)`. */
export interface WorkflowClass<Params = unknown, Output = unknown> {
  /**
   * Creates an instance (id default: a random UUID) and starts it while a permit is free. An id that
   * exists already returns that instance unchanged (its first params stay).
   */
  create(options?: { readonly id?: string | undefined; readonly params?: Params | undefined }): Promise<WorkflowInstance<Output>>
  /** Creates up to 100 instances in one transaction. */
  createBatch(
    instances: ReadonlyArray<{ readonly id?: string | undefined; readonly params?: Params | undefined }>
  ): Promise<ReadonlyArray<WorkflowInstance<Output>>>
  /** The instance with this id; rejects with `WorkflowNotFoundError` when there is none. */
  get(id: string): Promise<WorkflowInstance<Output>>
  /** Instances newest first, a page at a time, by status. */
  list(options?: WorkflowListOptions): Promise<WorkflowPage<Output>>
}

/** One workflow's options: how its runs are retried and timed out (steps have their own config). */
export type DurabilityWorkflowOptions = DurabilityMethodOptions

/** `DurabilityWorkflows`'s options. */
export interface DurabilityWorkflowsOptions<W extends WorkflowMap> extends DurabilityMethodOptions {
  /** The workflows, by name: each becomes a property of the instance. */
  readonly workflows: W
  /** Options for one workflow's runs. */
  readonly methods?: { readonly [K in keyof W]?: DurabilityWorkflowOptions } | undefined
  /** Told each lifecycle event of the instances' runs after it committed. */
  readonly onLifecycleEvent?: LifecycleHook | undefined
}

/** What `new DurabilityWorkflows(...)` takes: its options and where it attaches. */
export type DurabilityWorkflowsConfig<W extends WorkflowMap> = DurabilityWorkflowsOptions<W> & SchedulerAttachment

/** The calls of a `DurabilityWorkflows` besides its workflows. */
export interface DurabilityWorkflowsBase {
  /** Delegate the object's `alarm(info)` here (or to the shared scheduler). */
  alarm(info?: AlarmInvocationInfo): Promise<void>
  /** Deletes every instance created before `before` (with its steps and events); returns how many. */
  purgeBefore(before: number | Date): Promise<number>
}

/** A `DurabilityWorkflows` instance: the base calls and one `WorkflowClass` per workflow. */
export type DurabilityWorkflowsInstance<W extends WorkflowMap> =
  & DurabilityWorkflowsBase
  & { readonly [K in keyof W]: WorkflowClass<WorkflowParamsOf<W[K]>, WorkflowOutputOf<W[K]>> }

/** The `DurabilityWorkflows` class. */
export interface DurabilityWorkflowsConstructor {
  new<W extends WorkflowMap>(config: DurabilityWorkflowsConfig<W>): DurabilityWorkflowsInstance<W>
  /** Applies (default: latest) or reverts (`null`: all) the workflows' migrations. */
  migrate(context: DurabilityContext, target?: string | null): MigrationResult
}

const spec: HelperSpec<DurabilityWorkflowOptions, WorkflowDefinition, Workflows.Workflows> = {
  owner: "DurabilityWorkflows",
  define: (handler, method) => ({ handler: handler as unknown as WorkflowDefinition["handler"], ...pickExecution(method) }),
  make: (definitions, options) => Workflows.make(definitions, { ...options, presentError: toError }) as Effect.Effect<Workflows.Workflows, unknown, Scheduler.Services>
}

class DurabilityWorkflowsImpl extends Helper<Workflows.Workflows> {
  constructor(config: DurabilityWorkflowsConfig<WorkflowMap>) {
    if (typeof config !== "object" || config === null) throw new TypeError("DurabilityWorkflows needs a config object")
    const built = build({ ...config, handlers: config.workflows }, spec)
    super(built)
    for (const name of built.names) Helper.method(this, name, this.#workflow(name))
  }

  #instance(name: string, id: string): WorkflowInstance {
    const call = <A>(body: (service: Workflows.Workflows) => Effect.Effect<A, unknown>) => Helper.run(this, body)
    return {
      id,
      status: () => call((service) => service.status(name, id)),
      pause: () => call((service) => service.pause(name, id)),
      resume: () => call((service) => service.resume(name, id)),
      terminate: () => call((service) => service.terminate(name, id)),
      restart: () => call((service) => service.restart(name, id)),
      sendEvent: (event) => call((service) => service.sendEvent(name, id, event)),
      wait: (options) => call((service) => service.wait(name, id, options)),
      steps: (options) => call((service) => service.steps(name, id, options))
    }
  }

  #workflow(name: string): WorkflowClass {
    return {
      create: async (options) => {
        const made = await Helper.run(this, (service) => service.create(name, options))
        return this.#instance(name, made.id)
      },
      createBatch: async (instances) => {
        const made = await Helper.run(this, (service) => service.createBatch(name, instances))
        return made.map((one) => this.#instance(name, one.id))
      },
      get: async (id) => {
        await Helper.run(this, (service) => service.exists(name, id))
        return this.#instance(name, id)
      },
      list: (options) => Helper.run(this, (service) => service.list(name, options))
    }
  }

  static migrate(context: DurabilityContext, target?: string | null): MigrationResult {
    return migrateWith(context, Workflows.migrate, target)
  }
}

/** Durable workflows for promise-style code: sleep for days, wait for events, run children, on the object's one alarm. */
export const DurabilityWorkflows: DurabilityWorkflowsConstructor = DurabilityWorkflowsImpl as unknown as DurabilityWorkflowsConstructor
