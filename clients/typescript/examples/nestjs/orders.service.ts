// A NestJS service sending an order-shipped push through the HeraldClient of HeraldModule.

import { Injectable, Logger } from "@nestjs/common";
import { deriveKey, HeraldError, HeraldClient, type Accepted, type SendRequest } from "@herald/client";

export interface ShippedOrder {
  id: string;
  /** Who hears about it: the buyer, and whoever the order is a gift for. */
  userIds: string[];
  carrier: string;
  trackingUrl: string;
}

@Injectable()
export class OrdersService {
  private readonly logger = new Logger(OrdersService.name);

  constructor(private readonly herald: HeraldClient) {}

  /**
   * notifyShipped tells each user of the order that it shipped. The event's key with the user's
   * id gives each user one stable idempotency key, so this can run again (a redelivered event,
   * a retried job) without anyone hearing it twice.
   */
  async notifyShipped(order: ShippedOrder): Promise<Accepted[]> {
    const event = `order-${order.id}-shipped`;
    const reqs: SendRequest[] = order.userIds.map((userId) => ({
      idempotency_key: deriveKey(event, userId),
      category: "transactional",
      channels: ["push", "inbox"],
      recipients: [{ user_id: userId }],
      content: {
        title: "Your order has shipped",
        body: `Order ${order.id} is on its way with ${order.carrier}.`,
        link: order.trackingUrl,
        data: { order_id: order.id },
      },
      collapse_id: event,
    }));
    try {
      return await this.herald.sendBatch(reqs);
    } catch (err) {
      if (err instanceof HeraldError) {
        // code and field say what was wrong: invalid + recipients[0].user_id, unavailable…
        this.logger.error(`order ${order.id}: Herald refused the notification: ${err.code} ${err.field ?? ""} ${err.message}`);
      }
      throw err;
    }
  }
}
