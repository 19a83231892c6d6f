/*
 * A template set parsed: the main template, the fragments compiled (fragment.ts) and what the
 * main template's text says of its sections. The parse is most of what a renderer costs to make,
 * so it is made once per template set object: renderers made again for one set (a cold render
 * beside a warm one, as the warm-cache property tests make them by the thousand) share it, each
 * with caches of its own. A parsed set holds no render's state: the fragments only memoise the
 * shape of what they print.
 */

import { Liquid, type Template } from "liquidjs";
import { compileFragment, type Fragment } from "./fragment.js";
import {
  type BackendView,
  printsSlot,
  type RuleView,
  type ServerView,
  type Slot,
  SLOTS,
  slotsArePlain,
  type TcpView,
  type TemplateSet,
} from "./template-views.js";

export interface CompiledTemplates {
  readonly liquid: Liquid;
  readonly main: Template[];
  /** The main template prints each section as it is (see slotsArePlain). */
  readonly slotsArePlain: boolean;
  /** The sections the main template places. */
  readonly printed: ReadonlySet<Slot>;
  readonly backend: Fragment<BackendView>;
  readonly server: Fragment<ServerView>;
  readonly rule: Fragment<RuleView>;
  readonly tcp: Fragment<TcpView>;
}

const compiledSets = new WeakMap<TemplateSet, CompiledTemplates>();

export function compileTemplates(templates: TemplateSet): CompiledTemplates {
  let compiled = compiledSets.get(templates);
  if (compiled === undefined) {
    // In-memory templates only: a template must not read files on the render path.
    const liquid = new Liquid({ templates: {}, strictFilters: true, greedy: false });
    compiled = {
      liquid,
      main: liquid.parse(templates.main),
      slotsArePlain: slotsArePlain(templates.main),
      printed: new Set(SLOTS.filter((slot) => printsSlot(templates.main, slot))),
      backend: compileFragment(liquid, templates.backend, "backend"),
      server: compileFragment(liquid, templates.server, "server"),
      rule: compileFragment(liquid, templates.httpRule, "rule"),
      tcp: compileFragment(liquid, templates.tcpFrontend, "tcp"),
    };
    compiledSets.set(templates, compiled);
  }
  return compiled;
}
