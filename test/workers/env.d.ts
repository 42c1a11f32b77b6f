declare module "cloudflare:test" {
  interface ProvidedEnv {
    readonly STORAGE_OBJECT: DurableObjectNamespace<import("./worker.js").StorageObject>
    readonly ENGINE_OBJECT: DurableObjectNamespace<import("./worker.js").EngineObject>
  }
}
