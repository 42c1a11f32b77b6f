/**
 * A fake email provider for the newsletter example, kept in the object's own SQLite so the
 * walkthrough can show every attempt it saw. Its failures are deterministic:
 *
 * - an address containing "flaky" is refused (421) on the first 2 attempts with a given
 *   idempotency key, then accepted: the job's retries get it through;
 * - an address containing "bounce" is refused (550) every time, until `fix(address)`: the job
 *   fails for good and is dead-lettered; after `fix`, its redrive is delivered.
 *
 * Like a real provider, it accepts one message per idempotency key: a repeated request with a key
 * already accepted returns that message again instead of sending a second one.
 */

export type SendOutcome =
  | { readonly ok: true; readonly messageId: string; readonly replayed: boolean }
  | { readonly ok: false; readonly error: string }

export interface SendRequest {
  readonly idempotencyKey: string
  readonly to: string
  readonly subject: string
}

export interface ProviderView {
  readonly fixed: ReadonlyArray<string>
  readonly messages: ReadonlyArray<Record<string, SqlStorageValue>>
  readonly attempts: ReadonlyArray<Record<string, SqlStorageValue>>
}

const FLAKY_FAILURES = 2

export class FakeProvider {
  constructor(private readonly sql: SqlStorage) {
    sql.exec(`
      CREATE TABLE IF NOT EXISTS provider_messages (
        idempotency_key TEXT PRIMARY KEY,
        message_id TEXT NOT NULL,
        address TEXT NOT NULL,
        subject TEXT NOT NULL,
        accepted_at INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS provider_attempts (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        idempotency_key TEXT NOT NULL,
        address TEXT NOT NULL,
        outcome TEXT NOT NULL,
        at INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS provider_fixed (address TEXT PRIMARY KEY);
    `)
  }

  send(request: SendRequest): SendOutcome {
    const { idempotencyKey, subject, to } = request
    const [known] = this.sql.exec<{ message_id: string }>(
      "SELECT message_id FROM provider_messages WHERE idempotency_key = ?",
      idempotencyKey
    ).toArray()
    if (known !== undefined) return this.record(request, "replayed", { ok: true, messageId: known.message_id, replayed: true })
    const [seen] = this.sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM provider_attempts WHERE idempotency_key = ?",
      idempotencyKey
    ).toArray()
    if (to.includes("flaky") && (seen?.n ?? 0) < FLAKY_FAILURES) {
      return this.record(request, "refused", { ok: false, error: "421 service busy, try again later" })
    }
    if (to.includes("bounce") && !this.isFixed(to)) {
      return this.record(request, "refused", { ok: false, error: `550 mailbox ${to} unavailable` })
    }
    const messageId = `msg_${crypto.randomUUID().slice(0, 8)}`
    this.sql.exec(
      "INSERT INTO provider_messages (idempotency_key, message_id, address, subject, accepted_at) VALUES (?, ?, ?, ?, ?)",
      idempotencyKey,
      messageId,
      to,
      subject,
      Date.now()
    )
    return this.record(request, "accepted", { ok: true, messageId, replayed: false })
  }

  /** From now on, mail to `address` is delivered (the mailbox was repaired). */
  fix(address: string): void {
    this.sql.exec("INSERT OR IGNORE INTO provider_fixed (address) VALUES (?)", address)
  }

  view(): ProviderView {
    return {
      fixed: this.sql.exec<{ address: string }>("SELECT address FROM provider_fixed ORDER BY address").toArray()
        .map((row) => row.address),
      messages: this.sql.exec("SELECT * FROM provider_messages ORDER BY accepted_at").toArray(),
      attempts: this.sql.exec("SELECT * FROM provider_attempts ORDER BY seq").toArray()
    }
  }

  private isFixed(address: string): boolean {
    return this.sql.exec("SELECT 1 FROM provider_fixed WHERE address = ?", address).toArray().length > 0
  }

  private record(request: SendRequest, outcome: string, result: SendOutcome): SendOutcome {
    this.sql.exec(
      "INSERT INTO provider_attempts (idempotency_key, address, outcome, at) VALUES (?, ?, ?, ?)",
      request.idempotencyKey,
      request.to,
      outcome,
      Date.now()
    )
    return result
  }
}
