/*
 * The API server's own checks on the fields servicelb reads (k8s.io/kubernetes
 * pkg/apis/core/validation and pkg/apis/discovery/validation). The dry run and the local stack
 * accept hand-made objects; anything a real cluster could never hold is refused here, so that it
 * cannot produce a config HAProxy rejects (which would freeze every agent on the last good one).
 * Each function returns the problem in the API server's words, or null.
 *
 * One check is left out on purpose: the API server refuses endpoint addresses in the loopback and
 * link-local ranges. HAProxy accepts them, and the local stack's demo backends and the traffic
 * tests are loopback endpoints.
 */

import { BlockList, isIPv4, isIPv6 } from "node:net";
import { DNS1123_LABEL } from "./k8s-names.js";

export const PROTOCOLS: readonly string[] = ["TCP", "UDP", "SCTP"];
export const SERVICE_TYPES: readonly string[] = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
export const SESSION_AFFINITIES: readonly string[] = ["None", "ClientIP"];
export const ADDRESS_TYPES: readonly string[] = ["IPv4", "IPv6", "FQDN"];
/** discovery/v1 limits on one EndpointSlice. */
export const MAX_SLICE_ENDPOINTS = 1000;
export const MAX_SLICE_PORTS = 100;
export const MAX_ENDPOINT_ADDRESSES = 100;

// IPv4-mapped IPv6 addresses are refused by the strict IP validation of current API servers
// (KEP-4858); HAProxy would also treat them as IPv4, under the wrong family.
const ipv4Mapped = new BlockList();
ipv4Mapped.addSubnet("::ffff:0:0", 96, "ipv6");

/**
 * Strict IPv4: four decimal octets without leading zeros (Node's `isIPv4` is exactly that).
 */
export function ipv4Problem(value: string): string | null {
  return isIPv4(value) ? null : "must be a valid IPv4 address";
}

/**
 * Strict IPv6. Node's `isIPv6` accepts a zone id (`fe80::1%eth0`), which neither the API server
 * nor HAProxy does: HAProxy refuses the whole config over it.
 */
export function ipv6Problem(value: string): string | null {
  if (!isIPv6(value) || value.includes("%")) return "must be a valid IPv6 address";
  if (ipv4Mapped.check(value, "ipv6")) return "must not be an IPv4-mapped IPv6 address";
  return null;
}

export function ipProblem(value: string): string | null {
  return isIPv4(value) || ipv6Problem(value) === null ? null : "must be a valid IP address";
}

const RFC3339 =
  /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:Z|[+-]([0-9]{2}):([0-9]{2}))$/;

/**
 * A time as metav1.Time reads it (Go's `time.Parse(time.RFC3339, …)`): the shape, and each field
 * within its calendar range — no 13th month, no February 29th outside leap years, no hour 24, no
 * leap second. `Date.parse` takes some of these (it rolls 2019-02-29 over to March 1st) and gives
 * NaN for others, so a hand-made snapshot could pass for any age, the oldest included.
 */
export function rfc3339Problem(value: string): string | null {
  const m = RFC3339.exec(value);
  if (!m) return "must be an RFC 3339 time such as 2024-05-01T12:00:00Z";
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  const outOfRange = (what: string) => `must be an RFC 3339 time: ${what} out of range`;
  if (month < 1 || month > 12) return outOfRange("month");
  if (day < 1 || day > daysInMonth[month - 1]!) return outOfRange("day");
  if (hour > 23) return outOfRange("hour");
  if (minute > 59) return outOfRange("minute");
  if (second > 59) return outOfRange("second");
  if (m[7] !== undefined && Number(m[7]) > 23) return outOfRange("time zone offset hour");
  if (m[8] !== undefined && Number(m[8]) > 59) return outOfRange("time zone offset minute");
  return null;
}

/** A port name (IANA_SVC_NAME, RFC 6335): what a named targetPort must be. */
export function portNameProblem(value: string): string | null {
  if (value.length > 15) return "must be no more than 15 characters";
  if (!/^[-a-z0-9]+$/.test(value)) return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)";
  if (!/[a-z]/.test(value)) return "must contain at least one letter (a-z)";
  if (value.includes("--")) return "must not contain consecutive hyphens";
  if (value.startsWith("-") || value.endsWith("-")) return "must not begin or end with a hyphen";
  return null;
}

export interface Issue {
  path: Array<string | number>;
  message: string;
}

interface NamedPort {
  name: string;
  protocol: string;
  port?: number | null;
}

/**
 * The rules shared by Service, EndpointSlice and Endpoints ports: names are DNS labels, unique,
 * and required once there is more than one port (else two ports could not be told apart: both
 * would take the first unnamed endpoint port, and one port's traffic would reach the other's pods).
 */
export function portIssues(ports: readonly NamedPort[], path: string, namesRequired: boolean): Issue[] {
  const issues: Issue[] = [];
  const names = new Set<string>();
  ports.forEach((p, i) => {
    const at = [path, i];
    if (!PROTOCOLS.includes(p.protocol))
      issues.push({
        path: [...at, "protocol"],
        message: `Unsupported value: "${p.protocol}": supported values: "TCP", "UDP", "SCTP"`,
      });
    if (p.name === "") {
      if (namesRequired)
        issues.push({
          path: [...at, "name"],
          message: "Required value: a name is required when there is more than one port",
        });
      return;
    }
    if (!DNS1123_LABEL.test(p.name))
      issues.push({ path: [...at, "name"], message: `Invalid value: "${p.name}": must be a DNS label (RFC 1123)` });
    if (names.has(p.name)) issues.push({ path: [...at, "name"], message: `Duplicate value: "${p.name}"` });
    names.add(p.name);
  });
  return issues;
}

interface ServiceSpecFields {
  type: string;
  clusterIP?: string | null;
  sessionAffinity?: string | null;
  ports: ReadonlyArray<NamedPort & { port: number; targetPort?: number | string | null }>;
}

export function serviceSpecIssues(spec: ServiceSpecFields): Issue[] {
  const issues: Issue[] = [];
  if (!SERVICE_TYPES.includes(spec.type))
    issues.push({ path: ["spec", "type"], message: `Unsupported value: "${spec.type}"` });
  const ip = spec.clusterIP;
  if (ip && ip !== "None") {
    const problem = ipProblem(ip);
    if (problem) issues.push({ path: ["spec", "clusterIP"], message: `Invalid value: "${ip}": ${problem}` });
  }
  if (spec.sessionAffinity && !SESSION_AFFINITIES.includes(spec.sessionAffinity)) {
    issues.push({
      path: ["spec", "sessionAffinity"],
      message: `Unsupported value: "${spec.sessionAffinity}": supported values: "ClientIP", "None"`,
    });
  }
  for (const issue of portIssues(spec.ports, "ports", spec.ports.length > 1))
    issues.push({ ...issue, path: ["spec", ...issue.path] });
  // One (port, protocol) pair once: two backends of one name otherwise, which HAProxy refuses.
  const seen = new Set<string>();
  spec.ports.forEach((p, i) => {
    const key = `${p.port}/${p.protocol}`;
    if (seen.has(key))
      issues.push({ path: ["spec", "ports", i], message: `Duplicate value: port ${p.port}, protocol ${p.protocol}` });
    seen.add(key);
    if (typeof p.targetPort === "string") {
      const problem = portNameProblem(p.targetPort);
      if (problem)
        issues.push({
          path: ["spec", "ports", i, "targetPort"],
          message: `Invalid value: "${p.targetPort}": ${problem}`,
        });
    }
  });
  return issues;
}

interface SliceFields {
  addressType: string;
  ports: readonly NamedPort[];
  endpoints: ReadonlyArray<{ addresses: readonly string[] }>;
}

export function endpointSliceIssues(slice: SliceFields): Issue[] {
  const issues: Issue[] = [];
  if (!ADDRESS_TYPES.includes(slice.addressType))
    issues.push({
      path: ["addressType"],
      message: `Unsupported value: "${slice.addressType}": supported values: "FQDN", "IPv4", "IPv6"`,
    });
  if (slice.ports.length > MAX_SLICE_PORTS)
    issues.push({
      path: ["ports"],
      message: `Too many: ${slice.ports.length}: must have at most ${MAX_SLICE_PORTS} items`,
    });
  issues.push(...portIssues(slice.ports, "ports", false));
  if (slice.endpoints.length > MAX_SLICE_ENDPOINTS) {
    issues.push({
      path: ["endpoints"],
      message: `Too many: ${slice.endpoints.length}: must have at most ${MAX_SLICE_ENDPOINTS} items`,
    });
    return issues;
  }
  const check = slice.addressType === "IPv4" ? ipv4Problem : slice.addressType === "IPv6" ? ipv6Problem : null;
  slice.endpoints.forEach((ep, i) => {
    const at = ["endpoints", i, "addresses"];
    if (ep.addresses.length === 0)
      issues.push({ path: at, message: "Required value: must contain at least 1 address" });
    else if (ep.addresses.length > MAX_ENDPOINT_ADDRESSES)
      issues.push({
        path: at,
        message: `Too many: ${ep.addresses.length}: must have at most ${MAX_ENDPOINT_ADDRESSES} items`,
      });
    if (!check) return;
    ep.addresses.forEach((a, j) => {
      const problem = check(a);
      if (problem) issues.push({ path: [...at, j], message: `Invalid value: "${a}": ${problem}` });
    });
  });
  return issues;
}

interface EndpointsFields {
  subsets: ReadonlyArray<{ addresses: ReadonlyArray<{ ip: string }>; ports: readonly NamedPort[] }>;
}

export function endpointsIssues(endpoints: EndpointsFields): Issue[] {
  const issues: Issue[] = [];
  endpoints.subsets.forEach((subset, s) => {
    subset.addresses.forEach((a, i) => {
      const problem = ipProblem(a.ip);
      if (problem)
        issues.push({ path: ["subsets", s, "addresses", i, "ip"], message: `Invalid value: "${a.ip}": ${problem}` });
    });
    for (const issue of portIssues(subset.ports, "ports", subset.ports.length > 1))
      issues.push({ ...issue, path: ["subsets", s, ...issue.path] });
    subset.ports.forEach((p, i) => {
      if (p.port === null || p.port === undefined)
        issues.push({ path: ["subsets", s, "ports", i, "port"], message: "Required value" });
    });
  });
  return issues;
}
