/**
 * What the examples' objects share to answer HTTP: a JSON response, a request's JSON object body, an error
 * that carries its status, and the one mapping of errors to responses (the library rejects bad arguments with a `TypeError` or
 * `RangeError` naming the field, so those are the caller's 400s; anything else is a bug and propagates).
 */
export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}

export const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body, null, 2) + "\n", { status, headers: { "content-type": "application/json" } })

/** Runs a route, answering `HttpError`s and the library's argument errors as JSON `{ error }`. */
export const answer = async (route: () => Promise<Response>): Promise<Response> => {
  try {
    return await route()
  } catch (error) {
    if (error instanceof HttpError) return json({ error: error.message }, error.status)
    if (error instanceof TypeError || error instanceof RangeError) return json({ error: error.message }, 400)
    throw error
  }
}

/** A request's body as a JSON object (`{}` when empty); anything else is the caller's 400. */
export const objectBody = async (request: Request): Promise<Record<string, unknown>> => {
  const text = await request.text()
  if (text === "") return {}
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>
  } catch {
    // answered below
  }
  throw new HttpError(400, "Body must be a JSON object")
}
