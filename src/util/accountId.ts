// Account ids are UUIDs, generated (and stored) in lower case. RFC 9562 §4 makes the hex digits
// case-insensitive on input, and some languages format GUIDs in upper case, so an id a client
// sends is folded to lower case before it is looked up or compared (a scoped key's seat, say).
export function canonicalAccountId(id: string): string;
export function canonicalAccountId(id: string | undefined): string | undefined;
export function canonicalAccountId(id: string | undefined): string | undefined {
  return id === undefined ? undefined : id.toLowerCase();
}
