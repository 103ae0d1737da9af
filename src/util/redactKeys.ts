// A key's value (tagw_<k|m>_<16 hex id>_<secret>, src/auth/keys.ts) is recognisable by its shape,
// which is what its prefix is for. A client may paste one where it does not belong: into a path
// (DELETE /v1/keys/<the key> instead of its id), a parameter, a socket message. The request log
// writes paths, and error messages name what they could not take (`no route for GET /...`,
// `no quote for symbol ...`): wherever such text is logged or shown back, the key keeps its id
// (which key it was) and loses its secret.

const KEY_IN_TEXT = /(tagw_[mk]_[0-9a-f]{16}_)[A-Za-z0-9_-]+/g;

/** `text` with the secret of every key value in it shown as `[redacted]`. */
export function redactKeys(text: string): string {
  return text.includes('tagw_') ? text.replace(KEY_IN_TEXT, '$1[redacted]') : text;
}
