/*
 * Renders one small liquid template ("fragment") once per item — a backend, a server line, a
 * routing rule — tens of thousands of times per config.
 *
 * liquidjs costs microseconds per tag, which at 10,000 backends × 10 servers is over a second
 * (docs/design.md#rendering-cost). Most fragments only print fields and test fields for truthiness; for those the
 * output is a fixed sequence of literal text and field values once the truthiness of every field
 * is known. So we let liquidjs render the fragment once per truthiness pattern with sentinel
 * values, split its output at the sentinels, and afterwards join literal parts and field values
 * directly. The result is byte-identical to liquidjs by construction; fragments that do anything
 * else (filters, loops, comparisons, other variables) are rendered by liquidjs for every item.
 * The joined form can also be written straight into the output's bytes (`write`): no string is
 * built for the item at all, which is most of what a render would otherwise leave to the collector.
 */

import type { Liquid, Template } from "liquidjs";
import type { ByteWriter } from "../publish/chunks.js";

/** A fragment: its text for one item, or the same text written into a ByteWriter. */
export interface Fragment<T> {
  (item: T): string;
  write(item: T, out: ByteWriter): void;
}

/**
 * A field value that another fragment writes straight into the output (a backend's server lines).
 * It stands for the text `text()` returns: a string, which Liquid holds truthy even when empty.
 */
export abstract class Inline {
  abstract write(out: ByteWriter): void;
  abstract text(): string;
}

type Scalar = string | number | boolean | null | undefined;

const TAG = /\{\{-?\s*([^}]*?)\s*-?\}\}|\{%-?\s*([^%]*?)\s*-?%\}/g;
const SENTINEL = /\u0001(\d+)\u0002/g;

/** Fields the fragment reads, or null when it uses anything beyond `{{ v.f }}` and `{% if/unless v.f %}`. */
export function plainFields(source: string, variable: string): string[] | null {
  const field = new RegExp(`^${variable}\\.([A-Za-z_][A-Za-z0-9_]*)$`);
  const fields = new Set<string>();
  for (const m of source.matchAll(TAG)) {
    const output = m[1];
    const tag = m[2];
    if (output !== undefined) {
      const f = field.exec(output);
      if (!f) return null;
      fields.add(f[1]!);
      continue;
    }
    const words = (tag ?? "").split(/\s+/);
    const [name, arg, ...rest] = words;
    if (name === "else" || name === "endif" || name === "endunless") {
      if (arg !== undefined) return null;
      continue;
    }
    if ((name !== "if" && name !== "unless" && name !== "elsif") || arg === undefined || rest.length > 0) return null;
    const f = field.exec(arg);
    if (!f) return null;
    fields.add(f[1]!);
  }
  return [...fields];
}

interface Shape {
  literals: string[];
  fields: string[];
  /** The literals as UTF-8. */
  bytes: Buffer[];
  /** Writes an item of this shape: the literals, the fields' values between them. */
  write: Writer;
}

type Writer = (item: object, out: ByteWriter, literals: readonly Buffer[]) => void;

/*
 * Reading fields by a computed name (`item[f]`) goes through V8's megamorphic lookup, many
 * times slower than a read by a fixed name, and a config at 10,000 Services reads about a
 * million. So the readers and writers of a fragment are compiled for its field names, which are
 * identifiers by plainFields' grammar; values are never part of the generated code, and literals
 * are passed in, not written into it. Generated functions are shared by source text: each renderer compiles its fragments,
 * and only functions that are the same objects share what V8 learnt and optimized.
 */
const generated = new Map<string, unknown>();

function generate<F>(source: string): F {
  let f = generated.get(source);
  if (f === undefined) {
    f = new Function("Inline", `return ${source};`)(Inline);
    generated.set(source, f);
  }
  return f as F;
}

/** The shape key of an item (see `shapeOf`), or -1 when a field holds something liquidjs must render. */
function compileKey(fields: readonly string[]): (item: object) => number {
  const reads = fields.map(
    (f) =>
      `v = r.${f}; if (typeof v === "object" && v !== null && !(v instanceof Inline)) return -1; k = k * 3 + (v === false ? 1 : v === null || v === undefined ? 2 : 0);`,
  );
  return generate(`(r) => { let k = 0; let v; ${reads.join(" ")} return k; }`);
}

function compileWriter(fields: readonly string[], bytes: readonly Buffer[]): Writer {
  const literal = (i: number) => (bytes[i]!.length > 0 ? `out.bytes(b[${i}]);` : "");
  const steps = fields.map(
    (f, i) =>
      `v = r.${f}; if (typeof v === "string") out.text(v); else if (v instanceof Inline) v.write(out); else out.text(String(v)); ${literal(i + 1)}`,
  );
  return generate(`(r, out, b) => { let v; ${literal(0)} ${steps.join(" ")} }`);
}

export function compileFragment<T extends object>(liquid: Liquid, source: string, variable: string): Fragment<T> {
  const template: Template[] = liquid.parse(source);
  const slow = (item: T): string => liquid.renderSync(template, { [variable]: plain(item) }) as string;
  const fields = plainFields(source, variable);
  if (fields === null) return Object.assign(slow, { write: (item: T, out: ByteWriter) => out.text(slow(item)) });

  const shapes = new Map<number, Shape | null>();
  const shapeFor = (item: Record<string, unknown>, key: number): Shape | null => {
    const probe: Record<string, unknown> = {};
    fields.forEach((f, i) => {
      const v = item[f];
      probe[f] = v === false || v === null || v === undefined ? v : `\u0001${i}\u0002`;
    });
    const out = liquid.renderSync(template, { [variable]: probe }) as string;
    const literals: string[] = [];
    const used: string[] = [];
    let last = 0;
    for (const m of out.matchAll(SENTINEL)) {
      literals.push(out.slice(last, m.index));
      used.push(fields[Number(m[1])]!);
      last = m.index! + m[0].length;
    }
    literals.push(out.slice(last));
    // A stray sentinel byte means the engine transformed a value: not safe to specialise.
    const shape = literals.some((l) => l.includes("\u0001") || l.includes("\u0002")) ? null : makeShape(literals, used);
    shapes.set(key, shape);
    return shape;
  };

  // false prints "false" but null prints "": falsy values of different kinds are different shapes.
  const keyOf = compileKey(fields);
  /** The item's shape, or null when liquidjs must render it. */
  const shapeOf = (rec: Record<string, unknown>): Shape | null => {
    const key = keyOf(rec);
    if (key < 0) return null;
    const shape = shapes.get(key);
    return shape !== undefined ? shape : shapeFor(rec, key);
  };

  const text = (item: T): string => {
    const rec = item as Record<string, unknown>;
    const shape = shapeOf(rec);
    if (shape === null) return slow(item);
    // Values are joined as they are: sentinels only ever mark the probe's own placeholders.
    const { literals, fields: used } = shape;
    let out = literals[0]!;
    for (let i = 0; i < used.length; i++) {
      const v = rec[used[i]!];
      out += (v instanceof Inline ? v.text() : String(v as Scalar)) + literals[i + 1]!;
    }
    return out;
  };
  const write = (item: T, out: ByteWriter): void => {
    const rec = item as Record<string, unknown>;
    const shape = shapeOf(rec);
    if (shape === null) {
      out.text(slow(item));
      return;
    }
    shape.write(rec, out, shape.bytes);
  };
  return Object.assign(text, { write });
}

function makeShape(literals: string[], fields: string[]): Shape {
  const bytes = literals.map((l) => Buffer.from(l, "utf8"));
  return { literals, fields, bytes, write: compileWriter(fields, bytes) };
}

/** The item as liquidjs reads it: inline fields as their text. */
function plain<T>(item: T): T {
  const rec = item as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const k of Object.keys(rec)) {
    const v = rec[k];
    if (!(v instanceof Inline)) continue;
    copy ??= { ...rec };
    copy[k] = v.text();
  }
  return (copy ?? rec) as T;
}
