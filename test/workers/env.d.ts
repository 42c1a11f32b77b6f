declare module "cloudflare:test" {
  interface ProvidedEnv {
    readonly STORAGE_OBJECT: DurableObjectNamespace<import("./worker.js").StorageObject>
    readonly ENGINE_OBJECT: DurableObjectNamespace<import("./worker.js").EngineObject>
    readonly LAB_OBJECT: DurableObjectNamespace<import("./objects/LabObject.js").LabObject>
    readonly EFFECT_LEDGER: DurableObjectNamespace<import("./objects/EffectLedger.js").EffectLedger>
    readonly CHAOS_OBJECT: DurableObjectNamespace<import("./objects/ChaosObject.js").ChaosObject>
    readonly PARITY_OBJECT: DurableObjectNamespace<import("./objects/ParityObject.js").ParityObject>
    readonly MANAGED_OBJECT: DurableObjectNamespace<import("./objects/ManagedObject.js").ManagedObject>
    readonly HANDOFF_OBJECT: DurableObjectNamespace<import("./objects/ParityObject.js").HandoffObject>
    readonly JOBS_OBJECT: DurableObjectNamespace<import("./objects/JobsObject.js").JobsObject>
    readonly JOBS_CHAOS_OBJECT: DurableObjectNamespace<import("./objects/JobsChaosObject.js").JobsChaosObject>
    readonly STEPS_OBJECT: DurableObjectNamespace<import("./objects/StepsObject.js").StepsObject>
    readonly SCHEDULES_OBJECT: DurableObjectNamespace<import("./objects/SchedulesObject.js").SchedulesObject>
    readonly SHARDED_JOBS_OBJECT: DurableObjectNamespace<import("./objects/ShardedJobsObject.js").ShardedJobsObject>
    readonly LEASES_CHAOS_OBJECT: DurableObjectNamespace<import("./objects/LeasesChaosObject.js").LeasesChaosObject>
    readonly QUEUES_JOBS_OBJECT: DurableObjectNamespace<import("./objects/QueuesJobsObject.js").QueuesJobsObject>
    readonly INSPECTED_OBJECT: DurableObjectNamespace<import("./objects/InspectedObject.js").InspectedObject>
    readonly FACES_OBJECT: DurableObjectNamespace<import("./objects/FacesObject.js").FacesObject>
    readonly WORKFLOW_ENGINE_OBJECT: DurableObjectNamespace<import("./objects/WorkflowEngineObject.js").WorkflowEngineObject>
    readonly WORKFLOWS_OBJECT: DurableObjectNamespace<import("./objects/WorkflowsObject.js").WorkflowsObject>
    readonly ROUTING_OBJECT: DurableObjectNamespace<import("./objects/RoutingObject.js").RoutingObject>
    readonly JOBS_QUEUE: Queue
    readonly LOG_OBJECT: DurableObjectNamespace<import("./objects/LogObject.js").LogObject>
    readonly LOG_COLD: R2Bucket
    readonly FANOUT_OBJECT: DurableObjectNamespace<import("./objects/FanoutObject.js").FanoutObject>
    readonly FANOUT_ARCHIVE: R2Bucket
  }
}
