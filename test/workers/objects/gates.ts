/**
 * Named gates a test object's handlers wait on and the test opens over RPC: how a scenario holds a handler
 * running while it looks, however slow the machine (a hold of some milliseconds would make "still running"
 * a race with the clock). In memory, so a reset loses them.
 */
export class Gates {
  private readonly gates = new Map<string, { readonly opened: Promise<void>; readonly open: () => void }>()

  private gate(name: string) {
    let gate = this.gates.get(name)
    if (gate === undefined) {
      let open!: () => void
      const opened = new Promise<void>((resolve) => (open = resolve))
      gate = { opened, open }
      this.gates.set(name, gate)
    }
    return gate
  }

  /** Resolves once `name` is opened (at once if it already was). */
  opened(name: string): Promise<void> {
    return this.gate(name).opened
  }

  /** Opens `name`: its waiters go on, and later ones do not wait. */
  open(name: string): void {
    this.gate(name).open()
  }
}
