// Count limits from interface-spec.md "Limits". Crossing one of the first three is 413
// payload_too_large (issue 3: "413 for body, part, batch and event counts"); the per-mode
// counts are packet rules and answer 422 like every other rule.

export const MAX_CAPTURES_PER_REQUEST = 32;
export const MAX_EVENTS_PER_REQUEST = 256;
export const MAX_EVENTS_PER_CAPTURE = 128;

export const MAX_EVENTS_RGB_SINGLE = 1;
export const MAX_EVENTS_COLOR = 4;

export const CAPTURE_ID_MAX_CHARS = 128;

/** A request with more problems than this stops collecting; the list says so in its last item. */
export const MAX_ISSUES = 1000;
