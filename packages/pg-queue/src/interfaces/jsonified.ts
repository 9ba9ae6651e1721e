/** What JSON.stringify leaves out of an object (and JSON.parse cannot give back). */
type NotJson = undefined | symbol | ((...args: never[]) => unknown);

/**
 * The type of a value after a JSON round trip (`JSON.parse(JSON.stringify(value))`), as type-fest's `Jsonify` has
 * it: what `job.step()` returns, on its first run as on a replay (docs/guides/durable-steps.md).
 * - `toJSON()` is honoured: a `Date` becomes a `string`.
 * - Object properties that are undefined, functions or symbols are dropped; a property that may be undefined
 *   becomes optional. Methods of a class instance are dropped, its fields kept.
 * - In arrays, such items become `null`.
 * - A `Map` or `Set` becomes `{}`; a `bigint` has no JSON form (`never`).
 * - `unknown` and `any` stay as they are.
 * The library is stricter at run time than JSON.stringify: a step result holding a function, a symbol, a BigInt, a
 * Map or Set, NaN or Infinity, or undefined in an array, is refused with an error naming its key.
 */
export type Jsonified<T> = 0 extends 1 & T
  ? T
  : unknown extends T
    ? unknown
    : // From here each conditional distributes over a union: Date | undefined gives string | undefined.
      T extends { toJSON(...args: never[]): infer J }
      ? Jsonified<J>
      : T extends string | number | boolean | null
        ? T
        : T extends bigint
          ? never
          : T extends NotJson | void
            ? undefined
            : T extends ReadonlyMap<unknown, unknown> | ReadonlySet<unknown> | WeakMap<object, unknown> | WeakSet<object>
              ? Record<string, never>
              : T extends readonly unknown[]
                ? { -readonly [K in keyof T]: JsonifiedItem<T[K]> }
                : JsonifiedObject<T>;

/** An array item: what JSON.stringify writes as null is null. */
type JsonifiedItem<T> = T extends NotJson ? null : Jsonified<T>;

/** Properties that never may be undefined stay required, those that may be become optional, the rest are dropped; none is readonly (JSON.parse makes plain objects). */
type JsonifiedObject<T> = Flat<
  { -readonly [K in keyof T as K extends symbol ? never : T[K] extends NotJson ? never : undefined extends T[K] ? never : K]: Jsonified<T[K]> } & {
    -readonly [K in keyof T as K extends symbol ? never : T[K] extends NotJson ? never : undefined extends T[K] ? K : never]?: Jsonified<Exclude<T[K], NotJson>>;
  }
>;

/** One object type in editor hovers and error messages, rather than an intersection. */
type Flat<T> = { [K in keyof T]: T[K] } & {};
