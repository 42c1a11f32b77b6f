/**
 * What the examples' objects share to answer HTTP: a JSON response, an error that carries its status,
 * and the one mapping of errors to responses (the library rejects bad arguments with a `TypeError` or
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
