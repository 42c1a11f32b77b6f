// Run before sql.js is installed: durability/testing must import fine and fail only when a storage is
// made, with the message that names the install command. Prints the message; exits 1 otherwise.
import { Cause, Effect, Exit } from "effect"
import { MemoryStorage } from "durability/testing"

const exit = await Effect.runPromiseExit(MemoryStorage.make)
if (Exit.isSuccess(exit)) {
  console.error("MemoryStorage.make succeeded although sql.js is not installed")
  process.exit(1)
}
const failure = [...Cause.failures(exit.cause), ...Cause.defects(exit.cause)][0]
const message = failure instanceof Error ? failure.message : String(failure)
console.log(message)
process.exit(message.startsWith("durability/testing needs sql.js") ? 0 : 1)
