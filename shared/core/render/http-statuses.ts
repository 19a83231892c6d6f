/*
 * The HTTP statuses a setting may choose, in a module of their own: both the option table and
 * the annotation grammars check against them, and options.ts cannot import backend-settings.ts
 * (which imports options.ts through annotations.ts).
 */

export const REDIRECT_CODES = [301, 302, 303, 307, 308] as const;
export type RedirectCode = (typeof REDIRECT_CODES)[number];
/** The 4xx and 5xx statuses HAProxy 2.6 has a built-in page for; `deny_status` refuses any other. */
export const DENY_STATUSES = [400, 401, 403, 404, 405, 407, 408, 410, 413, 425, 429, 500, 501, 502, 503, 504] as const;
