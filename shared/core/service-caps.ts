/*
 * What one Service may take of a node. Every server slot of a config is a health-checked server
 * line, and HAProxy reserves a file descriptor for each when it starts or reloads, free slots
 * included (core/descriptors.ts); a node that cannot give them all runs none of the config, so
 * every tenant's changes would stop behind one Service of 5,000 ports. Beyond the caps a Service
 * is still served, in part: the port that carries its host and custom path (80, else its lowest
 * HTTP port) and its lowest other ports by number, and on each port its first endpoints by
 * address, with a warning that names the Service and the cap.
 */

/** Ports served per Service. */
export const MAX_SERVICE_PORTS = 64;
/**
 * Ready endpoints served per port, first by address: 1,000, where the v1 Endpoints API truncates
 * too (`endpoints.kubernetes.io/over-capacity`). At most 1,024 slots.
 */
export const MAX_PORT_ENDPOINTS = 1000;
/**
 * Server slots (file descriptors) per Service, over all its ports: a port that would take the
 * Service past it is not served. Its first port always is, and room is kept for the port of its
 * host: a port has 1,024 slots at most (what 1,000 endpoints take, and the most --min-server-slots
 * gives), so both fit.
 */
export const MAX_SERVICE_SLOTS = 2048;
