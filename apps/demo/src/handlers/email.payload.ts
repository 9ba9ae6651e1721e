/** Payload of the `emails` queue: everything the handler needs, so that it never reads the order back. */
export interface EmailPayload {
  to: string;
  subject: string;
  body: string;
  orderId?: string;
}
