/*
 * What one Service may take of a node. Every server slot of a config is a server line (memory on
 * every node), and a health-checked one also a file descriptor HAProxy reserves when it starts or
 * reloads, free slots included (core/model/descriptors.ts); a node that cannot give them all runs none
 * of the config, so every tenant's changes would stop behind one Service of 5,000 ports. Beyond the caps a Service
 * is still served, in part: the port that carries its host and custom path (80, else its lowest
 * HTTP port) and its lowest other ports by number, and on each port its first endpoints by
 * address, with a warning that names the Service and the cap.
 */

/** Ports served per Service. */
export const MAX_SERVICE_PORTS = 64;
/**
 * Ready endpoints served per port, first by address: 1,000, where the v1 Endpoints API truncates
 * too (`endpoints.kubernetes.io/over-capacity`). At most slotCount(1,000) slots: 1,001 in a
 * backend that grows at runtime, 1,251 in one that cannot (core/model/slots.ts).
 */
export const MAX_PORT_ENDPOINTS = 1000;
/**
 * Server slots per Service, over all its ports: a port that would take the Service past it is
 * not served. Its first port always is, and room is kept for the port of its host: two ports of
 * the most endpoints (1,251 slots each where they cannot grow at runtime, more than
 * --min-server-slots gives) fit.
 */
export const MAX_SERVICE_SLOTS = 2502;
