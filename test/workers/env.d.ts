declare module "cloudflare:test" {
  interface ProvidedEnv {
    readonly STORAGE_OBJECT: DurableObjectNamespace<import("./worker.js").StorageObject>
  }
}
