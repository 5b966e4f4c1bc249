/**
 * The one change record of a position: built once by the pipeline, then stored, published on the bus and
 * pushed to WebSocket subscribers without being rebuilt (convention 5). Plain data, msgpack/JSON-friendly.
 */
export interface PositionRecord {
  organizationId: string;
  /** The identifier the app uses (devices.identifier). */
  deviceId: string;
  userId: string | null;
  buildingId: number | null;
  floorId: number | null;
  indoor: boolean;
  /** Metres on the floor (indoor fixes only). */
  x: number | null;
  y: number | null;
  lat: number;
  lng: number;
  /** Radians. */
  yaw: number;
  /** Metres. */
  accuracy: number | null;
  /** When the fix was taken (epoch ms), as the app reported it. */
  timestamp: number;
  /** When the server received it (epoch ms): the clock detectors use. */
  receivedAt: number;
}

/** A stored fix's place, as rows of positions (and of the tables that copy a fix's place) read it. */
export interface StoredPlaceRow {
  building_id: number | null;
  floor_id: number | null;
  x: number | null;
  y: number | null;
  lat: number;
  lng: number;
}
