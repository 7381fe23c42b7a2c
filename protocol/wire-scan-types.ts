/**
 * The shape of the table protocol/wire-scan.ts walks, one entry per message of layerswarm.proto.
 * The table itself is generated (protocol/generated/layerswarm-scan.ts, `npm run gen:wire`), so
 * the scan needs no .proto parsing at run time and cannot drift from the schema.
 */

/** One field: protobufjs's camelCase name, `Message.proto_name`, its wire type and shape. */
export interface WireScanField {
  readonly name: string
  /** `Message.field_name` (proto names), for error messages and REPEATED_LIMITS. */
  readonly what: string
  /** 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 (protobuf encoding guide). */
  readonly wireType: number
  readonly repeated: boolean
  /** The nested message's name, for fields of a message type. */
  readonly message?: string
  /** The oneof this field belongs to, if any. */
  readonly oneof?: string
}

export interface WireScanMessage {
  readonly name: string
  readonly fieldsById: Readonly<Record<number, WireScanField>>
}
