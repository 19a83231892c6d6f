/*
 * A backend's server lines, written by the server fragment straight into the output (render.ts).
 */

import { FREE_SLOT_ADDRESS } from "../haproxy-config/server-line.js";
import type { Backend } from "../model/model.js";
import { slotName } from "../model/slots.js";
import type { ByteWriter } from "../publish/chunks.js";
import { type Fragment, Inline } from "./fragment.js";
import type { ServerView } from "./template-views.js";

/**
 * A backend's server lines as the backend fragment's `servers`. One per renderer, pointed at each
 * backend in turn: a fragment reads its item's fields while it renders and keeps none, so neither
 * this nor the view of its lines is allocated 10,000 times a render.
 */
export class ServerLines extends Inline {
  private backend: Backend | undefined;
  private readonly view: ServerView = { name: "", address: "", disabled: false, inter: "", cookie: null };

  constructor(private readonly fragment: Fragment<ServerView>) {
    super();
  }

  /** These lines, now those of `backend`. */
  of(backend: Backend, inter: string): this {
    this.backend = backend;
    this.view.inter = inter;
    return this;
  }

  /** The view of the slot at position i. */
  private at(i: number): ServerView {
    const { view } = this;
    const { servers, cookies } = this.backend!;
    const address = servers[i]!;
    view.name = slotName(i);
    view.address = address ?? FREE_SLOT_ADDRESS;
    view.disabled = address === null;
    view.cookie = cookies === null ? null : cookies[i]!;
    return view;
  }

  write(out: ByteWriter): void {
    const n = this.backend!.servers.length;
    for (let i = 0; i < n; i++) this.fragment.write(this.at(i), out);
  }

  text(): string {
    const n = this.backend!.servers.length;
    let text = "";
    for (let i = 0; i < n; i++) text += this.fragment(this.at(i));
    return text;
  }
}
