/**
 * A minimal Chrome DevTools Protocol client for workerd's inspector: one connection per worker
 * (isolate), for heap usage (B4) and CPU profiles (`--profile`).
 */
let WebSocketImpl = globalThis.WebSocket
if (WebSocketImpl === undefined) WebSocketImpl = (await import("ws")).WebSocket

export class Inspector {
  static async connect(port, worker) {
    const ws = new WebSocketImpl(`ws://127.0.0.1:${port}/core:user:${worker}`)
    await new Promise((resolve, reject) => {
      ws.onopen = resolve
      ws.onerror = (event) => reject(new Error(`inspector ${worker}: ${event.message ?? "connection failed"}`))
    })
    return new Inspector(ws)
  }

  constructor(ws) {
    this.ws = ws
    this.next = 1
    this.pending = new Map()
    ws.onmessage = (event) => {
      const message = JSON.parse(typeof event.data === "string" ? event.data : event.data.toString())
      const waiter = message.id === undefined ? undefined : this.pending.get(message.id)
      if (waiter === undefined) return
      this.pending.delete(message.id)
      if (message.error) waiter.reject(new Error(`${message.error.message} (${message.error.code})`))
      else waiter.resolve(message.result)
    }
  }

  send(method, params = {}) {
    const id = this.next++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      this.ws.send(JSON.stringify({ id, method, params }))
    })
  }

  /**
   * Used heap after a full collection, in bytes. workerd does not answer
   * `HeapProfiler.collectGarbage`; a heap snapshot collects garbage first (its chunks are dropped).
   */
  async heapUsed() {
    await this.send("HeapProfiler.takeHeapSnapshot", { reportProgress: false })
    const usage = await this.send("Runtime.getHeapUsage")
    return usage.usedSize
  }

  close() {
    this.ws.close()
  }
}
