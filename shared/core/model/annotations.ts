import { describeValue } from "../describe-value.js";
import { parseHost, publicSuffixClaim, type HostMatch } from "./host-match.js";
import { ALGORITHMS } from "../settings/options.js";

/**
 * Per-Service annotations, each with a strict grammar. A value that fails its grammar is dropped
 * with a warning naming the Service, the annotation and the reason; it never reaches the config,
 * so annotating a Service can never inject HAProxy directives.
 */
export const ANNOTATION_PREFIX = "serviceloadbalancer/";
export const ANNOTATIONS = {
  algorithm: `${ANNOTATION_PREFIX}lb.algorithm`,
  host: `${ANNOTATION_PREFIX}lb.host`,
  sslTerm: `${ANNOTATION_PREFIX}lb.sslTerm`,
  aclMatch: `${ANNOTATION_PREFIX}lb.aclMatch`,
  cookieSticky: `${ANNOTATION_PREFIX}lb.cookie-sticky-session`,
} as const;

export type Algorithm = (typeof ALGORITHMS)[number];

export interface ServiceAnnotations {
  algorithm?: Algorithm;
  host?: HostMatch;
  sslTerm: boolean;
  /** Path prefix without a trailing slash ("/" matches every path). */
  aclMatch?: string;
  cookieSticky: boolean;
}

export interface AnnotationWarning {
  annotation: string;
  message: string;
}

const PATH_SEGMENT = "([A-Za-z0-9._~:@+=,-]|%[0-9A-Fa-f]{2})+";
const PATH_PREFIX = new RegExp(`^(/|(/${PATH_SEGMENT})+/?)$`);
// Go's strconv.ParseBool, which the original used, so existing manifests keep their meaning.
const TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

/** Go's strconv.ParseBool, which the original used; undefined for anything else. */
export function parseBool(value: string): boolean | undefined {
  return TRUE.has(value) ? true : FALSE.has(value) ? false : undefined;
}

export function parsePathPrefix(value: string): string | { error: string } {
  if (value.length > 256 || !PATH_PREFIX.test(value)) {
    return {
      error: `${describeValue(value)} is not a path prefix (/segment/…; letters, digits, . _ ~ : @ + = , - and %XX)`,
    };
  }
  return value.length > 1 && value.endsWith("/") ? value.slice(0, -1) : value;
}

export function parseAnnotations(annotations: Readonly<Record<string, string>>): {
  values: ServiceAnnotations;
  warnings: AnnotationWarning[];
} {
  const warnings: AnnotationWarning[] = [];
  const values: ServiceAnnotations = { sslTerm: false, cookieSticky: false };
  const bool = (key: string): boolean => {
    const raw = annotations[key];
    if (raw === undefined) return false;
    if (TRUE.has(raw)) return true;
    if (!FALSE.has(raw))
      warnings.push({ annotation: key, message: `${describeValue(raw)} is not a boolean (true/false); using false` });
    return false;
  };

  const algorithm = annotations[ANNOTATIONS.algorithm];
  if (algorithm !== undefined) {
    if ((ALGORITHMS as readonly string[]).includes(algorithm)) values.algorithm = algorithm as Algorithm;
    else
      warnings.push({
        annotation: ANNOTATIONS.algorithm,
        message: `${describeValue(algorithm)} is not one of ${ALGORITHMS.join(", ")}; using the default`,
      });
  }
  const host = annotations[ANNOTATIONS.host];
  if (host !== undefined) {
    const parsed = parseHost(host);
    if (typeof parsed === "string") warnings.push({ annotation: ANNOTATIONS.host, message: `${parsed}; ignored` });
    else {
      const suffix = publicSuffixClaim(parsed);
      if (suffix === null) values.host = parsed;
      else
        warnings.push({
          annotation: ANNOTATIONS.host,
          message: `${describeValue(host)} is a wildcard over the public suffix ${suffix}, whose names belong to others; ignored`,
        });
    }
  }
  const acl = annotations[ANNOTATIONS.aclMatch];
  if (acl !== undefined) {
    const parsed = parsePathPrefix(acl);
    if (typeof parsed === "string") values.aclMatch = parsed;
    else warnings.push({ annotation: ANNOTATIONS.aclMatch, message: `${parsed.error}; ignored` });
  }
  values.sslTerm = bool(ANNOTATIONS.sslTerm);
  values.cookieSticky = bool(ANNOTATIONS.cookieSticky);
  return { values, warnings };
}
