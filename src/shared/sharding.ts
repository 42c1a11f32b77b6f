/**
 * Key-hash sharding shared by the jobs router (`JobsRouter`) and the routing client's hashed preset
 * (`RoutingClient.hashed`): a key's shard is a pure function of the key and the shard count, so a
 * redeploy never moves a key, and both address the same objects for the same key and name.
 * @internal
 */

const encoder = new TextEncoder()

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`: the documented routing hash (never change it). */
export const fnv1a32 = (text: string): number => {
  let hash = 0x811c9dc5
  for (const byte of encoder.encode(text)) {
    hash ^= byte
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash >>> 0
}

/** The shard (0-based) of a routing key among `shards`. */
export const shardOf = (key: string, shards: number): number => fnv1a32(key) % shards

/** The object name of shard `index` under `name`: `${name}:${index}`. */
export const shardName = (name: string, index: number): string => `${name}:${index}`
