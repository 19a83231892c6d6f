/*
 * The backend layout as it is kept (backend-layout.ts places Services into it): the record
 * published beside a config (layouts/<digest>.json), from which a cold instance places Services
 * where the last config had them, and what one warm instance keeps of it between renders.
 */

import { z } from "zod";
import { gatewaySlotsSchema } from "./gateway-slots.js";
import type { Backend, HttpRoute, Model } from "./model.js";
import { sha256 } from "../publish/sha256.js";

const BACKEND_NAME = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,300}$/);
const SPARE_NAME = z.string().regex(/^spare_[1-9][0-9]{0,5}$/);
const hostMatchSchema = z.object({ name: z.string().max(253), wildcard: z.boolean() });

const vacatedSchema = z.object({
  name: BACKEND_NAME,
  namespace: z.string().max(63),
  service: z.string().max(63),
  servicePort: z.number().int().min(1).max(65535),
  slots: z
    .number()
    .int()
    .min(1)
    .max(1 << 16),
  strip: z.object({ prefix: z.string().max(300), unlessHost: hostMatchSchema.nullable() }).nullable(),
});

export const backendLayoutSchema = z.object({
  version: z.literal(1),
  /** Server slots of each spare. */
  spareSlots: z
    .number()
    .int()
    .min(1)
    .max(1 << 16),
  /** Backends named after the Service port they serve, sorted. */
  named: z.array(BACKEND_NAME),
  /**
   * The server slots of each of `named`, in its order. A backend keeps its slots while its
   * endpoints fit (slots.ts), so the count is the layout's to remember; absent in a record from
   * before, whose backends then take the count their endpoints give.
   */
  slots: z
    .array(
      z
        .number()
        .int()
        .min(1)
        .max(1 << 16),
    )
    .optional(),
  /**
   * The slot count each backend that grew at runtime hashes its endpoints into: its count when
   * the layout placed it (slots.ts assignSlots). Absent: its `slots`.
   */
  hashSlots: z
    .record(
      BACKEND_NAME,
      z
        .number()
        .int()
        .min(1)
        .max(1 << 16),
    )
    .optional(),
  /** The spares and the Service port each holds (by its own backend's name), in order. */
  spares: z.array(z.object({ name: SPARE_NAME, holds: BACKEND_NAME.nullable() })),
  /** Backends whose Service port is gone, kept with every slot free. */
  vacated: z.array(vacatedSchema),
  /**
   * The server slots of the Gateway API's backends (gateway-slots.ts), placed after the Services
   * (backend-layout.ts placeGateway); absent without any. An absorbed layout carries them on to that step.
   */
  gateway: gatewaySlotsSchema.optional(),
});

export type BackendLayout = z.infer<typeof backendLayoutSchema>;
export type VacatedBackend = z.infer<typeof vacatedSchema>;

/** 16 hex digits of the record's sha256: its name in the store. */
export function layoutDigest(layout: BackendLayout): string {
  return sha256(JSON.stringify(layout)).slice(0, 16);
}

/** What placement keeps between renders of one instance: the record, and objects reused by identity. */
export class LayoutState {
  layout: BackendLayout | null = null;
  /** A held Service's spare, by the canonical backend object it was made from (renderer caches by identity). */
  readonly heldAs = new WeakMap<Backend, Backend>();
  /** Free spares and vacated backends, by name, for as long as their options stay the same. */
  readonly freeBackends = new Map<string, Backend>();
  freeKey = "";
  /** Input and output of the last placement, reused while the input and the room are the same. */
  last:
    | { input: Model; layout: BackendLayout | null; output: Model; room: number | null; descriptors: number }
    | undefined;
  /** A named backend in the slots it keeps, by the canonical backend object (renderer caches by identity). */
  readonly keptAs = new WeakMap<Backend, { hashSlots: number; backend: Backend }>();
  /** The routes moved to spares, reused while routes and layout stay the same (the renderer caches the maps by identity). */
  moved: { input: readonly HttpRoute[]; layout: BackendLayout; output: HttpRoute[] } | undefined;
  /**
   * The descriptors the smallest node has for a config's listeners and server slots (its limit
   * less what HAProxy takes itself), as the agents report it; null when not known.
   */
  room: number | null = null;

  constructor(layout: BackendLayout | null = null) {
    this.layout = layout;
  }
}
