/**
 * A value that exists only after something that needs it is built: the handle of an engine table,
 * which `Scheduler.attach` returns once the table's participant (which uses the handle when its
 * records run) is attached. The cell is the cycle's one explicit break: it is set once, right
 * after, and reading it earlier, or setting it twice, is a defect of the library.
 * @internal
 */

export interface Late<A> {
  /** The value; a defect before `set`. */
  readonly get: () => A
  /** Gives the value, once. */
  readonly set: (value: A) => void
}

/** An empty cell; `what` names it in the defect. */
export const make = <A>(what: string): Late<A> => {
  let cell: { readonly value: A } | undefined
  return {
    get: () => {
      if (cell === undefined) throw new Error(`${what} was read before it was set`)
      return cell.value
    },
    set: (value) => {
      if (cell !== undefined) throw new Error(`${what} was set twice`)
      cell = { value }
    }
  }
}
