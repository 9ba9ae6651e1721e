// node-postgres's value conversion (store/ids-query.ts). A public path of pg ("./lib/*" in its exports) that
// @types/pg does not declare.
declare module 'pg/lib/utils.js' {
  const utils: { prepareValue(value: unknown): unknown };
  export default utils;
}
