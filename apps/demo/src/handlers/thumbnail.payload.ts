/** Payload of the `thumbnails` queue. */
export interface ThumbnailPayload {
  imageId: number;
  width: number;
}
